"""The one registry of console actions: key bindings of every screen, the footer, the help
screen and the command palette are all generated from ACTIONS."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding

SCOPE_TITLES = {"app": "Everywhere", "runs": "Runs screen", "run": "Run screen",
                "new_plan": "New plan screen", "gpus": "GPUs screen"}


@dataclass(frozen=True)
class ConsoleAction:
    scope: str            # app | runs | run | new_plan | gpus
    name: str             # Textual action name (method `action_<name>` on the screen, or the app)
    key: str              # Textual key spec; several keys comma-separated
    description: str
    show: bool = True     # in the footer
    key_display: str | None = None
    priority: bool = False
    palette: bool = True  # offered in the command palette
    short: str | None = None   # the footer's label, when the description is too long for 80 columns

    def binding(self) -> Binding:
        return Binding(self.key, self.name, self.short or self.description, show=self.show, key_display=self.key_display,
                       priority=self.priority, id=f"{self.scope}.{self.name}")

    @property
    def keys_label(self) -> str:
        return self.key_display or ", ".join(self.key.split(","))


ACTIONS: list[ConsoleAction] = [
    # everywhere
    ConsoleAction("app", "quit_console", "q", "Quit (runs go on)", short="Quit"),
    ConsoleAction("app", "help", "question_mark", "Help", key_display="?"),
    ConsoleAction("app", "new_plan", "n", "New plan", short="New"),
    ConsoleAction("app", "gpus", "g", "GPUs", show=False),
    ConsoleAction("app", "show_runs", "R", "Runs", show=False),
    ConsoleAction("app", "toggle_queue", "P", "Pause/resume queue", show=False),
    ConsoleAction("app", "command_palette", "ctrl+p", "Command palette", show=False, palette=False),
    # Runs
    ConsoleAction("runs", "open_run", "enter,o", "Open", key_display="⏎/o"),
    ConsoleAction("runs", "cancel_run", "c", "Cancel"),
    ConsoleAction("runs", "retry_run", "r", "Retry"),
    ConsoleAction("runs", "move_to_front", "t", "To front", short="Front"),
    ConsoleAction("runs", "priority_up", "plus", "Priority +1", key_display="+", show=False),
    ConsoleAction("runs", "priority_down", "minus", "Priority -1", key_display="-", show=False),
    ConsoleAction("runs", "filter", "slash", "Filter", key_display="/"),
    ConsoleAction("runs", "sort_next", "s", "Sort"),
    ConsoleAction("runs", "sort_reverse", "S", "Reverse sort", show=False),
    ConsoleAction("runs", "export_report", "e", "Export report", short="Export"),
    # Run
    ConsoleAction("run", "back", "escape", "Back", key_display="esc"),
    ConsoleAction("run", "cancel_run", "c", "Cancel"),
    ConsoleAction("run", "toggle_pause", "p", "Pause/resume", short="Pause"),
    ConsoleAction("run", "extend_budget", "b", "Extend budget", short="+Budget"),
    ConsoleAction("run", "export_report", "e", "Export report", short="Export"),
    ConsoleAction("run", "toggle_follow", "f", "Follow log", short="Follow"),
    ConsoleAction("run", "follow_tail", "end", "Jump to the log's tail and follow it", show=False),
    ConsoleAction("run", "search", "slash", "Search", key_display="/"),
    ConsoleAction("run", "next_match", "n", "Next match", show=False),
    ConsoleAction("run", "previous_match", "N", "Previous match", show=False),
    ConsoleAction("run", "view_line", "v", "Log: the current match (or the bottom line) in full", show=False),
    ConsoleAction("run", "toggle_log_scale", "l", "Metrics: log scale on/off", show=False),
    ConsoleAction("run", "tab('log')", "1", "Log tab", show=False),
    ConsoleAction("run", "tab('metrics')", "2", "Metrics tab", show=False),
    ConsoleAction("run", "tab('submissions')", "3", "Submissions tab", show=False),
    ConsoleAction("run", "tab('revisions')", "4", "Revisions tab", show=False),
    # New plan
    ConsoleAction("new_plan", "back", "escape", "Back", key_display="esc"),
    ConsoleAction("new_plan", "enqueue", "ctrl+s", "Enqueue plan", priority=True),
    ConsoleAction("new_plan", "load_plan", "ctrl+o", "Load plan file", priority=True),
    # GPUs
    ConsoleAction("gpus", "back", "escape", "Back", key_display="esc"),
]


def actions_for(*scopes: str) -> list[ConsoleAction]:
    return [a for a in ACTIONS if a.scope in scopes]


def bindings(scope: str) -> list[Binding]:
    return [a.binding() for a in actions_for(scope)]
