"""A one-line gauge: `label ███████░░░░ text`, coloured by how full it is."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget


class Gauge(Widget):
    DEFAULT_CSS = """
    Gauge { height: 1; }
    """

    def __init__(self, label: str, warn: float = 0.75, danger: float = 0.9, **kwargs):
        super().__init__(**kwargs)
        self.label = label
        self.fraction: float | None = None
        self.text = "-"
        self.warn, self.danger = warn, danger

    def set_value(self, fraction: float | None, text: str) -> None:
        fraction = None if fraction is None else max(0.0, min(1.0, fraction))
        if (fraction, text) != (self.fraction, self.text):
            self.fraction, self.text = fraction, text
            self.refresh()

    def render(self) -> Text:
        width = self.size.width
        label = f"{self.label:<7}"
        bar_w = max(4, width - len(label) - len(self.text) - 2)
        out = Text(label, style="bold", no_wrap=True, overflow="crop")
        if self.fraction is None:
            out.append("·" * bar_w, style="dim")
        else:
            filled = round(self.fraction * bar_w)
            color = "red" if self.fraction >= self.danger else "yellow" if self.fraction >= self.warn else "green"
            out.append("█" * filled, style=color)
            out.append("░" * (bar_w - filled), style="dim")
        out.append(f" {self.text}")
        return out
