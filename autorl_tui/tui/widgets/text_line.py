"""Updating a Static only when its text changed, and without a layout pass when its height is
fixed: a Static's `update` re-lays-out the whole screen by default, which under a flood of events
(a status line rewritten every batch) is most of what a frame costs."""

from __future__ import annotations

from textual.widgets import Static


def set_text(widget: Static, content, *, fixed_height: bool = False) -> bool:
    """Show `content` in `widget` unless it already shows it. `fixed_height`: the widget's height
    does not depend on its text (e.g. `height: 1`), so no layout is needed. Returns whether it changed."""
    if getattr(widget, "_shown_text", None) == content:
        return False
    widget._shown_text = content
    widget.update(content, layout=not fixed_height)
    return True
