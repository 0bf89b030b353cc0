"""Is an agent stack usable on this machine? What `autorl-tui agents` and `doctor` report.

A spec says what it needs: `needs` (executables on PATH), `requires_env` (variables that must
be set; "A|B" means either), and `env` (everything passed through, the rest being optional). An
AutoRL-Bench folder's needs are read from its start script (catalog/script_scan.py): the agent
CLIs it calls join `needs`, and the checkouts it `cd`s into must be folders here."""

from __future__ import annotations

import os
import shutil
from typing import Any, Mapping

from autorl_tui.catalog.agents import AgentSpec, known_output_formats
from autorl_tui.catalog.script_scan import ScriptNeeds, missing_pieces


def install_hints(spec: AgentSpec) -> list[str]:
    hints = []
    npm = spec.install.get("npm") or []
    pip = spec.install.get("pip") or []
    if npm:
        hints.append("npm install -g " + " ".join(npm))
    if pip:
        hints.append("pip install " + " ".join(pip))
    if spec.install.get("note"):
        hints.append(str(spec.install["note"]))
    return hints


def agent_readiness(spec: AgentSpec, environ: Mapping[str, str] | None = None,
                    path: str | None = None) -> dict[str, Any]:
    """{"name", "output_format", "ready", "missing_executables", "missing_env", "unset_env",
    "found_executables": {name: path}, "install": [hints], "driver_required", "problems": [text]}"""
    environ = os.environ if environ is None else environ
    search = path if path is not None else environ.get("PATH", "")
    found, missing_exe = {}, []
    for exe in spec.needs:
        where = shutil.which(exe, path=search)
        if where:
            found[exe] = where
        else:
            missing_exe.append(exe)
    required = [str(r) for r in spec.raw.get("requires_env") or []]
    missing_env = [r for r in required if not any(environ.get(n) for n in r.split("|"))]
    required_names = {n for r in required for n in r.split("|")}
    unset = [n for n in spec.env if n not in required_names and not environ.get(n) and n not in spec.env_values]
    problems = []
    if missing_exe:
        problems.append(f"not on PATH: {', '.join(missing_exe)}"
                        + (f" (install: {'; '.join(install_hints(spec))})" if install_hints(spec) else ""))
    for r in missing_env:
        problems.append(f"set {' or '.join(r.split('|'))} in the harness environment")
    script = ScriptNeeds(**spec.script) if spec.script else None
    if script:       # an AutoRL-Bench folder: the checkouts its start script `cd`s into
        problems += missing_pieces(ScriptNeeds(checkouts=script.checkouts), environ)
    if spec.output_format not in known_output_formats():
        problems.append(f"no parser for output_format {spec.output_format!r}")
    return {"name": spec.name, "output_format": spec.output_format, "ready": not problems,
            "missing_executables": missing_exe, "missing_env": missing_env, "unset_env": unset,
            "found_executables": found, "install": install_hints(spec),
            "driver_required": bool(spec.driver.get("required")), "problems": problems,
            "script": None if script is None else dict(script.to_dict(),
                                                       unset=[n for n in script.reads if not environ.get(n)])}


def all_agents_readiness(search_path, environ: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Readiness of every agent found on `search_path` (what `doctor` prints), sorted by name."""
    from autorl_tui.catalog.agents import list_agents

    return [dict(agent_readiness(spec, environ), source=str(spec.source), description=spec.description)
            for _, spec in sorted(list_agents(list(search_path)).items())]


def executable_dirs(spec: AgentSpec, path: str | None = None) -> list[str]:
    """Folders holding the spec's `needs` executables as found on the harness's PATH (e.g. an npm
    global prefix), so a local agent whose PATH is reduced to the system folders still finds them."""
    search = path if path is not None else os.environ.get("PATH", "")
    dirs: list[str] = []
    for exe in spec.needs:
        where = shutil.which(exe, path=search)
        if where and os.path.dirname(where) not in dirs:
            dirs.append(os.path.dirname(where))
    return dirs
