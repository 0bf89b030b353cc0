"""Inline SVG charts for the reports: line charts with axes, a score timeline, a phase band and a
radar chart. Pure string building (no plotting library, no scripts): the output is embedded in
the HTML and readable in any browser, printed, or without JavaScript."""

from __future__ import annotations

import math
from html import escape

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777",
           "#4b5563", "#65a30d")
PHASE_COLORS = {"explore": "#60a5fa", "write_code": "#a78bfa", "train": "#f59e0b", "evaluate": "#34d399",
                "idle": "#e5e7eb"}


IN_GRADING = ("received", "grading")      # submission states before a verdict


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0]
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / max(1, n)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = [round(start, 12)]
    while ticks[-1] < hi - step * 1e-9 and len(ticks) < 30:  # the last tick is at or above hi
        ticks.append(round(start + len(ticks) * step, 12))
    return ticks


def fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e5 or a < 1e-3:
        return f"{v:.1e}"
    if a >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


def fmt_duration(s: float) -> str:
    """The true value, to the second: 150 s is "2m30s", never "3m" (ticks at 150/200/250 s used to
    read 2m/3m/4m)."""
    total = int(round(float(s)))
    sign, total = ("-" if total < 0 else ""), abs(total)
    h, rest = divmod(total, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{sign}{h}h" + (f"{m:02d}m" if m or sec else "") + (f"{sec:02d}s" if sec else "")
    if m:
        return f"{sign}{m}m" + (f"{sec:02d}s" if sec else "")
    return f"{sign}{sec}s"


# Tick steps for time axes, in seconds: round minutes and hours, so labels stay short and true.
TIME_STEPS = (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 900, 1200, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def time_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    """Ticks at round durations (every 30 s, 5 min, 1 h, ...) covering [lo, hi] with about n steps."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return [0.0]
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(1, n)
    step = next((t for t in TIME_STEPS if t >= raw), None) or math.ceil(raw / 86400) * 86400
    start = math.floor(lo / step) * step
    ticks = [float(start)]
    while ticks[-1] < hi - step * 1e-9 and len(ticks) < 40:
        ticks.append(float(start + len(ticks) * step))
    return ticks


class Frame:
    """Maps data to pixels inside a plot area with margins for the axes."""

    def __init__(self, width, height, x_range, y_range, margin=(12, 16, 38, 56)):
        self.w, self.h = width, height
        self.top, self.right, self.bottom, self.left = margin
        self.x0, self.x1 = x_range
        self.y0, self.y1 = y_range
        if self.x1 <= self.x0:
            self.x1 = self.x0 + 1
        if self.y1 <= self.y0:
            self.y1 = self.y0 + 1

    def x(self, v):
        return self.left + (v - self.x0) / (self.x1 - self.x0) * (self.w - self.left - self.right)

    def y(self, v):
        return self.h - self.bottom - (v - self.y0) / (self.y1 - self.y0) * (self.h - self.top - self.bottom)

    def axes(self, x_label="", y_label="", x_fmt=fmt, y_ticks=None, x_ticks=None) -> list[str]:
        out = []
        y_ticks = y_ticks if y_ticks is not None else nice_ticks(self.y0, self.y1)
        x_ticks = x_ticks if x_ticks is not None else nice_ticks(self.x0, self.x1, 6)
        for t in y_ticks:
            if self.y0 - 1e-9 <= t <= self.y1 + 1e-9:
                y = self.y(t)
                out.append(f'<line class="grid" x1="{self.left}" x2="{self.w - self.right}" y1="{y:.1f}" y2="{y:.1f}"/>')
                out.append(f'<text class="tick" x="{self.left - 5}" y="{y + 3.5:.1f}" text-anchor="end">{escape(fmt(t))}</text>')
        for t in x_ticks:
            if self.x0 - 1e-9 <= t <= self.x1 + 1e-9:
                x = self.x(t)
                out.append(f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{self.h - self.bottom}" y2="{self.h - self.bottom + 4}"/>')
                out.append(f'<text class="tick" x="{x:.1f}" y="{self.h - self.bottom + 15}" '
                           f'text-anchor="middle">{escape(x_fmt(t))}</text>')
        out.append(f'<line class="axis" x1="{self.left}" x2="{self.w - self.right}" '
                   f'y1="{self.h - self.bottom}" y2="{self.h - self.bottom}"/>')
        out.append(f'<line class="axis" x1="{self.left}" x2="{self.left}" y1="{self.top}" y2="{self.h - self.bottom}"/>')
        if x_label:
            out.append(f'<text class="label" x="{(self.left + self.w - self.right) / 2:.0f}" y="{self.h - 4}" '
                       f'text-anchor="middle">{escape(x_label)}</text>')
        if y_label:
            out.append(f'<text class="label" transform="translate(12,{(self.top + self.h - self.bottom) / 2:.0f}) rotate(-90)" '
                       f'text-anchor="middle">{escape(y_label)}</text>')
        return out


def _svg(width, height, body: list[str], title: str = "") -> str:
    t = f"<title>{escape(title)}</title>" if title else ""
    return (f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">{t}' + "".join(body) + "</svg>")


def _path(points, frame: Frame) -> str:
    """A polyline path that breaks at missing (None) values."""
    parts, pen = [], False
    for x, y in points:
        if y is None or x is None:
            pen = False
            continue
        parts.append(f"{'L' if pen else 'M'}{frame.x(x):.1f},{frame.y(y):.1f}")
        pen = True
    return "".join(parts)


def line_chart(series: list[dict], *, width=460, height=200, x_label="", y_label="", title="",
               markers: list[dict] | None = None, x_fmt=fmt) -> str:
    """series: [{label, points: [(x, y)], band: [(x, lo, hi)] optional, color optional}].
    markers: vertical lines [{x, label, color}] (e.g. a flagged step)."""
    xs = [x for s in series for x, y in s["points"] if x is not None and y is not None]
    ys = [y for s in series for x, y in s["points"] if x is not None and y is not None]
    ys += [v for s in series for _, lo, hi in s.get("band", []) for v in (lo, hi) if v is not None]
    if not xs:
        return _svg(width, 60, ['<text class="empty" x="10" y="30">no finite values to plot</text>'], title)
    y_lo, y_hi = min(ys), max(ys)
    pad = (y_hi - y_lo) * 0.05 or abs(y_hi) * 0.05 or 1.0
    ticks = nice_ticks(y_lo - pad, y_hi + pad)
    frame = Frame(width, height, (min(xs), max(xs)), (ticks[0], ticks[-1]))
    body = frame.axes(x_label, y_label, x_fmt=x_fmt, y_ticks=ticks)
    for i, s in enumerate(series):
        color = s.get("color") or PALETTE[i % len(PALETTE)]
        band = [(x, lo, hi) for x, lo, hi in s.get("band", []) if lo is not None and hi is not None]
        if len(band) > 1 and any(hi > lo for _, lo, hi in band):
            upper = "".join(f"{'L' if j else 'M'}{frame.x(x):.1f},{frame.y(hi):.1f}" for j, (x, lo, hi) in enumerate(band))
            lower = "".join(f"L{frame.x(x):.1f},{frame.y(lo):.1f}" for x, lo, hi in reversed(band))
            body.append(f'<path d="{upper}{lower}Z" fill="{color}" fill-opacity="0.15" stroke="none"/>')
        d = _path(s["points"], frame)
        if d:
            body.append(f'<path d="{d}" fill="none" stroke="{color}" stroke-width="1.6"/>')
        if sum(1 for _, y in s["points"] if y is not None) <= 30:
            for x, y in s["points"]:
                if y is not None:
                    body.append(f'<circle cx="{frame.x(x):.1f}" cy="{frame.y(y):.1f}" r="2.2" fill="{color}"/>')
    for m in markers or []:
        x = frame.x(m["x"])
        color = m.get("color", "#dc2626")
        body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{frame.top}" y2="{height - frame.bottom}" stroke="{color}" '
                    f'stroke-dasharray="3,3"/>')
        if m.get("label"):
            body.append(f'<text class="marker" x="{x + 3:.1f}" y="{frame.top + 10}" fill="{color}">{escape(m["label"])}</text>')
    if len(series) > 1:
        lx = frame.left + 8
        for i, s in enumerate(series):
            color = s.get("color") or PALETTE[i % len(PALETTE)]
            body.append(f'<rect x="{lx}" y="{frame.top + 2}" width="10" height="3" fill="{color}"/>'
                        f'<text class="legend" x="{lx + 13}" y="{frame.top + 7}">{escape(s["label"])}</text>')
            lx += 20 + 6.5 * len(s["label"])
    return _svg(width, height, body, title)


def score_timeline(submissions: list[dict], *, baseline: float | None, budget_s: float | None,
                   width=920, height=260) -> str:
    """Dev score per submission over time: scored points, running best (step line), baseline
    (dashed), dropped submissions as crosses on the x axis, those still being graded (a report made
    mid-run) as hollow grey rings there, the selected one ringed."""
    scored = [s for s in submissions if s["score"] is not None and s["t_s"] is not None]
    ys = [s["score"] for s in scored] + ([baseline] if baseline is not None else [])
    x_hi = max([s["t_s"] for s in submissions if s["t_s"] is not None] + [budget_s or 0, 1])
    lo = min(ys) if ys else 0.0
    hi = max(ys) if ys else 100.0
    pad = max(2.0, (hi - lo) * 0.1)
    ticks = nice_ticks(max(0.0, lo - pad), min(100.0, hi + pad) if hi + pad > lo else 100.0)
    frame = Frame(width, height, (0, x_hi), (ticks[0], ticks[-1]), margin=(18, 20, 40, 56))
    body = frame.axes("time since agent start", "dev score", x_fmt=fmt_duration, y_ticks=ticks,
                      x_ticks=time_ticks(0, x_hi, 8))
    if baseline is not None:
        y = frame.y(baseline)
        body.append(f'<line x1="{frame.left}" x2="{width - frame.right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#6b7280" '
                    f'stroke-dasharray="6,4"/><text class="legend" x="{width - frame.right - 4}" y="{y - 4:.1f}" '
                    f'text-anchor="end">baseline {baseline:.1f}</text>')
    if budget_s:
        x = frame.x(budget_s)
        body.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{frame.top}" y2="{height - frame.bottom}" stroke="#9ca3af"/>'
                    f'<text class="legend" x="{x - 3:.1f}" y="{frame.top - 5}" text-anchor="end">budget</text>')
    best, pts = None, []
    for s in scored:
        if best is not None:
            pts.append((s["t_s"], best))
        best = s["score"] if best is None else max(best, s["score"])
        pts.append((s["t_s"], best))
    if pts:
        pts.append((x_hi, best))
        body.append(f'<path d="{_path(pts, frame)}" fill="none" stroke="#16a34a" stroke-width="1.5" opacity="0.7"/>')
    for s in submissions:
        if s["t_s"] is None:
            continue
        x = frame.x(s["t_s"])
        label = f"#{s['seq']} {s['status']}" + (f" {s['score']:.1f}" if s["score"] is not None else "")
        if s["score"] is not None:
            y = frame.y(s["score"])
            body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="#2563eb"><title>{escape(label)}</title></circle>')
            if s.get("is_best"):
                body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="8" fill="none" stroke="#16a34a" stroke-width="2"/>')
            body.append(f'<text class="tick" x="{x:.1f}" y="{y - 9:.1f}" text-anchor="middle">#{s["seq"]}</text>')
        elif s["status"] in IN_GRADING:
            y = height - frame.bottom - 8
            body.append(f'<circle class="grading" cx="{x:.1f}" cy="{y:.1f}" r="4.5" fill="none" stroke="#6b7280" '
                        f'stroke-width="2"><title>{escape(label)}</title></circle>')
        else:
            y = height - frame.bottom - 8
            body.append(f'<path d="M{x - 4:.1f},{y - 4:.1f}L{x + 4:.1f},{y + 4:.1f}M{x - 4:.1f},{y + 4:.1f}L{x + 4:.1f},{y - 4:.1f}" '
                        f'stroke="#dc2626" stroke-width="2"><title>{escape(label)}</title></path>')
    grading = any(s["status"] in IN_GRADING for s in submissions)
    body.append(f'<text class="legend" x="{frame.left + 6}" y="{frame.top + 2}">● scored  ◯ selected  '
                f'<tspan fill="#dc2626">✕ dropped</tspan>  '
                + ('<tspan fill="#6b7280">○ being graded</tspan>  ' if grading else "")
                + '<tspan fill="#16a34a">— best so far</tspan></text>')
    return _svg(width, height, body, "dev score per submission")


def phase_band(segments: list[dict], span_s: float, *, width=920, height=54) -> str:
    if not segments or span_s <= 0:
        return _svg(width, 30, ['<text class="empty" x="10" y="20">no activity recorded</text>'], "phases")
    frame = Frame(width, height, (0, span_s), (0, 1), margin=(4, 20, 22, 56))
    body = []
    for seg in segments:
        x0, x1 = frame.x(seg["start_s"]), frame.x(seg["end_s"])
        body.append(f'<rect x="{x0:.1f}" y="{frame.top}" width="{max(0.5, x1 - x0):.1f}" height="{height - frame.top - frame.bottom}" '
                    f'fill="{PHASE_COLORS.get(seg["phase"], "#999")}"><title>{escape(seg["phase"])} '
                    f'{fmt_duration(seg["start_s"])}–{fmt_duration(seg["end_s"])}</title></rect>')
    for t in time_ticks(0, span_s, 8):
        if t <= span_s:
            body.append(f'<text class="tick" x="{frame.x(t):.1f}" y="{height - 6}" text-anchor="middle">{fmt_duration(t)}</text>')
    return _svg(width, height, body, "phases over time")


def radar(axes: list[str], series: list[dict], *, size=440) -> str:
    """series: [{label, values: [0..100 or None per axis]}]; all axes higher-is-better."""
    n = len(axes)
    if n < 3:
        return ""
    cx, cy = size / 2, size / 2 + 10
    r = size / 2 - 100
    body = []

    def point(i, v):
        a = -math.pi / 2 + 2 * math.pi * i / n
        return cx + r * v / 100 * math.cos(a), cy + r * v / 100 * math.sin(a)

    for level in (25, 50, 75, 100):
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in (point(i, level) for i in range(n)))
        body.append(f'<polygon points="{pts}" fill="none" stroke="#e5e7eb"/>')
        x, y = point(0, level)
        body.append(f'<text class="tick" x="{x + 3:.1f}" y="{y + 3:.1f}">{level}</text>')
    for i, name in enumerate(axes):
        x, y = point(i, 100)
        body.append(f'<line x1="{cx}" y1="{cy}" x2="{x:.1f}" y2="{y:.1f}" stroke="#d1d5db"/>')
        lx, ly = point(i, 112)
        anchor = "middle" if abs(lx - cx) < 10 else ("start" if lx > cx else "end")
        body.append(f'<text class="label" x="{lx:.1f}" y="{ly + 4:.1f}" text-anchor="{anchor}">{escape(name)}</text>')
    for k, s in enumerate(series):
        color = PALETTE[k % len(PALETTE)]
        pts = [point(i, v if v is not None else 0) for i, v in enumerate(s["values"])]
        body.append(f'<polygon points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in pts)}" fill="{color}" '
                    f'fill-opacity="0.12" stroke="{color}" stroke-width="2"/>')
        for (x, y), v in zip(pts, s["values"]):
            if v is not None:
                body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"/>')
    for k, s in enumerate(series):
        body.append(f'<rect x="8" y="{10 + 16 * k}" width="10" height="10" fill="{PALETTE[k % len(PALETTE)]}"/>'
                    f'<text class="legend" x="22" y="{19 + 16 * k}">{escape(s["label"])}</text>')
    return _svg(size, size + 20, body, "radar across tasks")


def interval_plot(rows: list[dict], *, width=720, row_h=26) -> str:
    """Improvement per seed, one row per (agent, task) cell, for any number of cells: each seed's
    value a dot, the mean a tick, mean ± noise a bar. rows: [{label, values: [float], mean, noise}]."""
    values = [v for r in rows for v in r["values"]] + [r["mean"] + s * (r["noise"] or 0) for r in rows
                                                        if r["mean"] is not None for s in (-1, 1)]
    if not values:
        return ""
    lo, hi = min(min(values), 0.0), max(max(values), 0.0)
    pad = (hi - lo) * 0.08 or 1.0
    ticks = nice_ticks(lo - pad, hi + pad)
    label_w, top, bottom = 230, 12, 34
    height = top + bottom + row_h * len(rows)
    x0, x1 = label_w, width - 16

    def x(v):
        return x0 + (v - ticks[0]) / ((ticks[-1] - ticks[0]) or 1) * (x1 - x0)
    body = []
    for t in ticks:
        body.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top}" y2="{height - bottom}" '
                    f'stroke="{"#9ca3af" if t == 0 else "#e5e7eb"}"/>')
        body.append(f'<text class="tick" x="{x(t):.1f}" y="{height - bottom + 14}" text-anchor="middle">'
                    f'{escape(fmt(t))}</text>')
    body.append(f'<text class="label" x="{(x0 + x1) / 2:.0f}" y="{height - 4}" text-anchor="middle">'
                f'improvement (points), one dot per seed; bar: mean ± seed noise</text>')
    for i, r in enumerate(rows):
        cy = top + row_h * i + row_h / 2
        color = PALETTE[i % len(PALETTE)]
        body.append(f'<text class="legend" x="{label_w - 8}" y="{cy + 4:.1f}" text-anchor="end">{escape(r["label"])}</text>')
        if r["mean"] is not None and r.get("noise"):
            body.append(f'<line x1="{x(r["mean"] - r["noise"]):.1f}" x2="{x(r["mean"] + r["noise"]):.1f}" '
                        f'y1="{cy:.1f}" y2="{cy:.1f}" stroke="{color}" stroke-width="6" stroke-opacity="0.25"/>')
        if r["mean"] is not None:
            body.append(f'<line x1="{x(r["mean"]):.1f}" x2="{x(r["mean"]):.1f}" y1="{cy - 8:.1f}" y2="{cy + 8:.1f}" '
                        f'stroke="{color}" stroke-width="2"/>')
        for v in r["values"]:
            body.append(f'<circle cx="{x(v):.1f}" cy="{cy:.1f}" r="3.5" fill="{color}"/>')
    return _svg(width, height, body, "improvement per seed")


def dual_chart(left: dict, right: dict, *, width=920, height=220, x_label="", title="") -> str:
    """Two series over one x axis with their own y axes (left and right), e.g. dev score and mean
    reward per submission. Each: {label, points: [(x, y)], color}."""
    def rng(points):
        ys = [y for _, y in points if y is not None]
        if not ys:
            return [0.0, 1.0]
        pad = (max(ys) - min(ys)) * 0.1 or abs(max(ys)) * 0.1 or 1.0
        return nice_ticks(min(ys) - pad, max(ys) + pad)
    xs = [x for s in (left, right) for x, y in s["points"] if x is not None and y is not None]
    if not xs:
        return ""
    lt, rt = rng(left["points"]), rng(right["points"])
    fl = Frame(width, height, (min(xs), max(xs)), (lt[0], lt[-1]), margin=(18, 64, 38, 56))
    fr = Frame(width, height, (min(xs), max(xs)), (rt[0], rt[-1]), margin=(18, 64, 38, 56))
    body = fl.axes(x_label, left.get("axis", left["label"]), x_fmt=fmt_duration, y_ticks=lt,
                   x_ticks=time_ticks(min(xs), max(xs), 6))
    xr = width - fr.right
    body.append(f'<line class="axis" x1="{xr}" x2="{xr}" y1="{fr.top}" y2="{height - fr.bottom}"/>')
    for t in rt:
        y = fr.y(t)
        body.append(f'<text class="tick" x="{xr + 5}" y="{y + 3.5:.1f}" fill="{right["color"]}">{escape(fmt(t))}</text>')
    body.append(f'<text class="label" transform="translate({width - 8},{(fr.top + height - fr.bottom) / 2:.0f}) rotate(90)" '
                f'text-anchor="middle">{escape(right.get("axis", right["label"]))}</text>')
    for s, f in ((left, fl), (right, fr)):
        d = _path(s["points"], f)
        if d:
            body.append(f'<path d="{d}" fill="none" stroke="{s["color"]}" stroke-width="1.8"/>')
        for x, y in s["points"]:
            if y is not None:
                body.append(f'<circle cx="{f.x(x):.1f}" cy="{f.y(y):.1f}" r="3" fill="{s["color"]}"/>')
    lx = fl.left + 8
    for s in (left, right):
        body.append(f'<rect x="{lx}" y="{fl.top - 12}" width="10" height="3" fill="{s["color"]}"/>'
                    f'<text class="legend" x="{lx + 13}" y="{fl.top - 7}">{escape(s["label"])}</text>')
        lx += 30 + 6.5 * len(s["label"])
    return _svg(width, height, body, title)
