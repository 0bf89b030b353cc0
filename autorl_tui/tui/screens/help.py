"""Help: every key binding, generated from the action registry."""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from autorl_tui.tui.actions import ACTIONS, SCOPE_TITLES


def help_table() -> Table:
    table = Table(show_header=True, header_style="bold", expand=True, box=None, pad_edge=False)
    table.add_column("Where", style="dim", no_wrap=True)
    table.add_column("Keys", style="bold cyan", no_wrap=True)
    table.add_column("Action")
    for scope, title in SCOPE_TITLES.items():
        for action in (a for a in ACTIONS if a.scope == scope):
            table.add_row(title, action.keys_label, action.description)
    return table


class HelpScreen(ModalScreen):
    BINDINGS = [("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog", id="help"):
            yield Static("[b]autorl-tui keys[/b]  (esc closes; quitting the console leaves runs going)")
            yield Static(help_table())
