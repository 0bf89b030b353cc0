"""Line charts drawn with Unicode braille (2x4 dots per cell): no plotting library needed."""

from __future__ import annotations

import math

from rich.text import Text
from textual.widget import Widget

_DOT = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))   # [row][col] within a cell


def braille_lines(points: list[tuple[float, float]], width: int, height: int,
                  y_range: tuple[float, float] | None = None) -> list[str]:
    """`height` strings of `width` braille characters plotting the polyline through `points`."""
    width, height = max(1, width), max(1, height)
    grid = [[0] * width for _ in range(height)]
    pts = [(x, y) for x, y in points if y is not None and math.isfinite(y)]
    if pts:
        xs = [p[0] for p in pts]
        x0, x1 = min(xs), max(xs)
        y0, y1 = y_range or (min(p[1] for p in pts), max(p[1] for p in pts))
        if y1 == y0:
            y0, y1 = y0 - 1, y1 + 1
        cols, rows = width * 2, height * 4

        def to_dot(x, y):
            cx = 0 if x1 == x0 else round((x - x0) / (x1 - x0) * (cols - 1))
            cy = round((y1 - y) / (y1 - y0) * (rows - 1))
            return cx, min(rows - 1, max(0, cy))

        def plot(cx, cy):
            grid[cy // 4][cx // 2] |= _DOT[cy % 4][cx % 2]

        prev = None
        for x, y in pts:
            cur = to_dot(x, y)
            if prev is None:
                plot(*cur)
            else:
                (ax, ay), (bx, by) = prev, cur
                steps = max(abs(bx - ax), abs(by - ay), 1)
                for i in range(steps + 1):
                    plot(ax + round((bx - ax) * i / steps), ay + round((by - ay) * i / steps))
            prev = cur
    return ["".join(chr(0x2800 + c) for c in row) for row in grid]


SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float], width: int = 16) -> str:
    """The last `width` values as block characters, lowest ▁ to highest █ ('' without values)."""
    vals = [v for v in values if v is not None and math.isfinite(v)][-width:]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi == lo:
        return SPARKS[len(SPARKS) // 2] * len(vals)
    return "".join(SPARKS[round((v - lo) / (hi - lo) * (len(SPARKS) - 1))] for v in vals)


def fmt_value(v: float | None) -> str:
    if v is None:
        return "-"
    if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
        return f"{v:.2e}"
    return f"{v:.4g}"


class MetricChart(Widget):
    """One series: a title line (name, last, min, max, points) over a braille plot with a y axis
    and a step axis; `log_scale` plots log10 of the values (when all are positive). A series of
    one point is stated, not charted."""

    DEFAULT_CSS = """
    MetricChart { height: 8; min-height: 4; }
    """

    def __init__(self, name: str, color: str = "green", **kwargs):
        super().__init__(**kwargs)
        self.series_name = name
        self.color = color
        self.points: list[tuple[float, float]] = []
        self.source = ""
        self.log_scale = False

    def set_log_scale(self, on: bool) -> None:
        self.log_scale = on
        self.refresh()

    def set_points(self, points: list[tuple[float, float]], source: str = "") -> None:
        self.points = points
        self.source = source
        self.refresh()

    def render(self) -> Text:
        width, height = self.size.width, self.size.height
        text = Text(no_wrap=True, overflow="crop")
        values = [y for _, y in self.points if y is not None]
        last = values[-1] if values else None
        head = f"{self.series_name}  last {fmt_value(last)}"
        if values:
            head += f"  min {fmt_value(min(values))}  max {fmt_value(max(values))}  n={len(values)}"
        if self.source:
            head += f"  [{self.source}]"
        text.append(head[:width] + "\n", style="bold")
        plot_h = max(1, height - 2)          # the title above, the step axis below
        if not values:
            text.append("(no points yet)", style="dim")
            return text
        points = [(x, y) for x, y in self.points if y is not None]
        if len(points) == 1:
            text.append(f"one point: {fmt_value(points[0][1])} at step {points[0][0]:g}", style="dim")
            return text
        log = self.log_scale and min(values) > 0
        if self.log_scale and not log:
            text.append("(log scale needs positive values: linear)\n", style="dim")
            plot_h = max(1, plot_h - 1)
        lo, hi = min(values), max(values)
        axis_w = 9
        plot_w = max(1, width - axis_w - 1)
        shown = [(x, math.log10(y)) for x, y in points] if log else points
        rows = braille_lines(shown, plot_w, plot_h)
        for i, row in enumerate(rows):
            label = fmt_value(hi) if i == 0 else fmt_value(lo) if i == plot_h - 1 else ""
            text.append(f"{label:>{axis_w}}│", style="dim")
            text.append(row + "\n", style=self.color)
        first, last_x = f"{min(x for x, _ in points):g}", f"{max(x for x, _ in points):g}"
        scale = "  log" if log else ""
        middle = max(1, plot_w - len(first) - len(last_x) - len("step") - len(scale) - 2)
        text.append(f"{'step':>{axis_w}}└{first}{' ' * (middle // 2)}{scale}{' ' * (middle - middle // 2)}{last_x}",
                    style="dim")
        return text
