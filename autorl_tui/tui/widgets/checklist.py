"""A SelectionList whose checkbox says its state with a glyph (✓ or blank), not only with a colour
(Textual draws the same `X` for both and tells them apart by colour alone)."""

from __future__ import annotations

from rich.segment import Segment
from textual.strip import Strip
from textual.widgets import SelectionList
from textual.widgets._toggle_button import ToggleButton

CHECKED, UNCHECKED = "✓", " "


class CheckList(SelectionList):
    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        segments = list(strip)
        if len(segments) < 3 or segments[1].text != ToggleButton.BUTTON_INNER:
            return strip
        try:
            option = self.get_option_at_index(self.scroll_offset.y + y)
        except Exception:  # noqa: BLE001 - past the last option: nothing to mark
            return strip
        glyph = CHECKED if option.value in self._selected else UNCHECKED
        segments[1] = Segment(glyph, segments[1].style)
        return Strip(segments, strip.cell_length)
