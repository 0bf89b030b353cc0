"""Keys for a one-line bar (the Runs filter, the log search) opened with `/`: while the bar is
open every printable key is text for it, never a command.

Why it is needed: a binding runs only once its key has bubbled up to the app, and focus moves
later still, so keys typed in the same instant as `/` reached the table or the log as commands
(typing "humaneval" opened New plan). Keys reach the screen's `on_key` in the order typed, so
the bar is opened there, and a printable key that did not go through the bar (the Input stops
every printable key it takes) is put into it."""

from __future__ import annotations

from typing import Callable

from textual.widgets import Input


def route_key(event, box: Input, open_bar: Callable[[], None], close_bar: Callable[[], None]) -> None:
    """Call from a screen's `on_key`."""
    if not box.display:
        if event.key == "slash":
            open_bar()
            event.stop()
            event.prevent_default()
        return
    if event.key == "escape":
        close_bar()
        event.stop()
    elif event.is_printable:
        box.insert_text_at_cursor(event.character)
        box.focus()
        event.stop()
        event.prevent_default()
