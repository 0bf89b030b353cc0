"""Compare's efficiency view: held-out improvement against cost, one dot per run. The cost axis is
the first measure every plotted run has: dollars, then GPU-hours, then agent hours (wall time of
the agent). Flagged runs (trust findings) are drawn hollow and red."""

from __future__ import annotations

from html import escape

from autorl_tui.reports.svg import Frame, _svg, nice_ticks

LABELLED = 8
AXES = (("cost_usd", "driver cost (USD)"), ("gpu_hours", "GPU-hours"), ("agent_hours", "agent hours"))


def cost_axis(runs: list[dict]) -> tuple[str, str]:
    plotted = [r for r in runs if r.get("improvement") is not None]
    for key, label in AXES:
        if plotted and all((r["cost_per_point"].get(key) or 0) > 0 for r in plotted):
            return key, label
    return AXES[-1]


def efficiency(runs: list[dict]) -> dict:
    key, label = cost_axis(runs)
    dots = [{"run_id": r["run_id"], "agent": r["agent"], "task": r["task"], "x": r["cost_per_point"].get(key),
             "y": r["improvement"], "flagged": r["trust"]["flagged"]}
            for r in runs if r.get("improvement") is not None and r["cost_per_point"].get(key) is not None]
    return {"axis": key, "axis_label": label, "dots": dots}


def scatter_svg(view: dict, *, width=620, height=260) -> str:
    dots = view["dots"]
    title = f"held-out improvement against {view['axis_label']}, one dot per run"
    if not dots:
        return _svg(width, 60, ['<text class="empty" x="10" y="30">no finished run has both an improvement and a '
                                'cost to plot</text>'], title)
    xs, ys = [d["x"] for d in dots], [d["y"] for d in dots] + [0.0]
    xt = nice_ticks(0.0, max(xs) * 1.05 or 1.0, 6)
    pad = (max(ys) - min(ys)) * 0.08 or 1.0
    yt = nice_ticks(min(ys) - pad, max(ys) + pad)
    frame = Frame(width, height, (xt[0], xt[-1]), (yt[0], yt[-1]))
    body = frame.axes(view["axis_label"], "improvement (points)", y_ticks=yt, x_ticks=xt)
    body.append(f'<line x1="{frame.left}" x2="{width - frame.right}" y1="{frame.y(0):.1f}" y2="{frame.y(0):.1f}" '
                f'stroke="#9ca3af" stroke-dasharray="4,3"/>')
    for d in dots:
        x, y = frame.x(d["x"]), frame.y(d["y"])
        tip = escape(f"{d['run_id']} {d['agent']} on {d['task']}: {d['y']:+.2f} points"
                     + (" (FLAGGED by trust findings)" if d["flagged"] else ""))
        style = 'fill="none" stroke="#dc2626" stroke-width="2"' if d["flagged"] else 'fill="#2563eb"'
        body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" {style}><title>{tip}</title></circle>')
        if len(dots) <= LABELLED or d["flagged"]:      # many dots: names only on flagged ones (all in tooltips)
            body.append(f'<text class="legend" x="{x + 7:.1f}" y="{y + 4:.1f}">{escape(d["agent"])}</text>')
    return _svg(width, height, body, title)
