"""Jinja rendering for reports, and where the templates are found.

Templates live in the repository's top-level `templates/` folder, and are found by one rule,
installed or in a checkout: the package's `templates` (`autorl_tui/templates`, a link to
`../templates` in the repository; the installed package holds a copy as package data). Folders
in $AUTORL_TEMPLATES are searched first (a user's own templates).
"""

from __future__ import annotations

import contextlib
import json
import math
from datetime import datetime, timezone
from pathlib import Path

import jinja2

from autorl_tui.exitcodes import InfraError, UsageError
from autorl_tui.reports import svg
from autorl_tui.scores import env_summary_text
from autorl_tui.units import fmt_bytes
from autorl_tui import settings


PACKAGE_TEMPLATES = Path(__file__).resolve().parents[1] / "templates"


def template_dirs() -> list[Path]:
    dirs = []
    dirs.extend(settings.current().templates)
    dirs.append(PACKAGE_TEMPLATES)
    return [d for d in dirs if d.is_dir()]


def environment() -> jinja2.Environment:
    dirs = template_dirs()
    if not dirs:
        raise InfraError(f"report templates not found in {PACKAGE_TEMPLATES}: reinstall autorl-tui, or set "
                         "AUTORL_TEMPLATES to the repository's templates/ folder")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader([str(d) for d in dirs]),
                             autoescape=jinja2.select_autoescape(["html", "j2"]),
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=_num, dur=_dur, pct=_pct, ts=_ts, bytes=_bytes, signed=_signed, band=_band,
                       env_summary=env_summary_text)
    env.globals["phase_colors"] = svg.PHASE_COLORS
    return env


def render(template: str, context: dict) -> str:
    return environment().get_template(template).render(**context)


def write_outputs(report: dict, html: str | None, html_path: str | None, json_path: str | None) -> list[Path]:
    """Writes the report's JSON and HTML, each whole or not at all (a temporary name, then a rename).
    UsageError when a path cannot be written (a read-only home's reports/ folder, say)."""
    outputs = []
    if json_path:
        outputs.append((Path(json_path), report_json(report)))
    if html_path and html is not None:
        outputs.append((Path(html_path), html))
    written = []
    for path, text in outputs:
        tmp = path.with_name(f".{path.name}.partial")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(text)
            tmp.replace(path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}; pass --html PATH and/or --json PATH "
                             "in a folder you can write (a read-only home cannot hold reports)") from None
        written.append(path)
    return written


def report_json(report: dict) -> str:
    """The report as JSON text: one line per top-level key, and per element of a top-level list (a
    run, a cell). Each line comes from the json module's C encoder; `indent=` would use its pure
    Python one, 2.6 s of a 10,000-run compare's 12 MB."""
    encode = json.JSONEncoder(allow_nan=False, default=str).encode
    lines = []
    for key, value in report.items():
        if isinstance(value, list) and value:
            value_text = "[\n" + ",\n".join(f"  {encode(item)}" for item in value) + "\n ]"
        else:
            value_text = encode(value)
        lines.append(f" {encode(str(key))}: {value_text}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _num(v, digits=1, empty="—"):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return empty
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return f"{v:,.{digits}f}"


def _signed(v, digits=1):
    if v is None:
        return "—"
    return f"{v:+.{digits}f}"


def _band(b, digits=2):
    """A bootstrap band (reports/bootstrap.py) as `[low, high] (95%, n questions)`."""
    if not b:
        return "—"
    return f"[{b['low']:+.{digits}f}, {b['high']:+.{digits}f}] ({100 * b['level']:.0f}%, n={b['n']})"


def _pct(v, digits=0):
    return "—" if v is None else f"{100 * v:.{digits}f}%"


def _dur(v):
    if v is None:
        return "—"
    v = float(v)
    if v < 60:
        return f"{v:.0f} s"
    if v < 3600:
        return f"{int(v // 60)} m {int(v % 60):02d} s"
    return f"{int(v // 3600)} h {int(v % 3600 // 60):02d} m"


def _ts(v):
    if v is None:
        return "—"
    return datetime.fromtimestamp(v, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _bytes(v):
    return fmt_bytes(v, missing="—")
