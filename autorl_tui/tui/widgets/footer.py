"""The screens' footer: compact and without the command-palette entry (Help and the palette list
ctrl+p), so the shown keys fit at 80 columns."""

from __future__ import annotations

from textual.widgets import Footer


def console_footer() -> Footer:
    return Footer(compact=True, show_command_palette=False)
