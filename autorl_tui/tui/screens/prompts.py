"""Small modal dialogs: confirm (y/n) and a one-line input."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [("y", "answer(True)", "Yes"), ("n,escape", "answer(False)", "No")]

    def __init__(self, question: str):
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question)
            yield Label("[b]y[/b] yes   [b]n[/b] / esc no", classes="hint")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class InputScreen(ModalScreen[str | None]):
    BINDINGS = [("escape", "cancel", "Cancel")]

    def __init__(self, question: str, default: str = ""):
        super().__init__()
        self.question = question
        self.default = default

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.question)
            yield Input(self.default, id="answer")
            yield Label("enter to confirm, esc to cancel", classes="hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class LineScreen(ModalScreen[None]):
    """One log line in full, wrapped (the log view shows a line on one row, cut at the edge)."""
    BINDINGS = [("escape,v,q", "dismiss", "Close")]

    def __init__(self, title: str, message: str):
        super().__init__()
        self.title_text = title
        self.message = message

    def compose(self) -> ComposeResult:
        from rich.text import Text
        from textual.containers import VerticalScroll
        from textual.widgets import Static

        with VerticalScroll(classes="dialog", id="line-detail"):
            yield Label(self.title_text, classes="hint")
            yield Static(Text(self.message), id="line-text")     # Text: brackets stay literal
            yield Label("esc closes", classes="hint")
