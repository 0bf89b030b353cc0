"""AutoRL-Bench agent folders read into ordinary AgentSpecs (docs/autorl-bench.md).

An AutoRL-Bench agent is a folder `agents/<id>/` holding `start.sh` and `config.yaml`
(`name`, `description`, `start`, `env_vars`). It is read here into an ordinary AgentSpec: run as
`bash start.sh` with stdout and stderr together (also kept in the workspace's `agent.log`), its
`env_vars` under the harness's values of the same names, and the AutoRL-Bench grading contract
(`grading_api: autorl-bench`: a failed grading answers 200 with score 0.0)."""

from __future__ import annotations

from pathlib import Path

import yaml

from autorl_tui.catalog.agent_spec import (NETWORK_POLICIES, AgentSpec, builtin_agents_dir, known_output_formats,
                                           load_agent_spec)
from autorl_tui.catalog.autorl_bench import CONFIG, RESERVED_ENV, STACKS, START_DEFAULT
from autorl_tui.catalog.script_scan import scan_script
from autorl_tui.exitcodes import UsageError


def is_agent_folder(path: Path) -> bool:
    path = Path(path)
    if not path.is_dir() or (path / "agent.yaml").exists():
        return False
    start = _start_name(path) if (path / CONFIG).is_file() else START_DEFAULT
    return start is not None and (path / start).is_file()


def _start_name(folder: Path) -> str | None:
    try:
        raw = yaml.safe_load((folder / CONFIG).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return None
    return str(raw.get("start") or START_DEFAULT) if isinstance(raw, dict) else None


# A stack whose folder runs an external pipeline that drives the stack's CLI (its start script never
# calls it, so the scan cannot see it): AutoRL-Bench's opencode folder (its README: `npm install -g opencode`).
PIPELINE_CLIS = {"opencode": "opencode"}


def _stack(folder: Path, raw: dict) -> str | None:
    named = raw.get("stack")
    if named:
        if str(named) not in STACKS:
            raise UsageError(f"AutoRL-Bench agent {folder}: stack {named!r} unknown; known: {', '.join(sorted(STACKS))}")
        return str(named)
    words = f"{folder.name} {raw.get('name', '')}".lower().replace("-", " ").replace("_", " ").split()
    return next((s for s in STACKS if s in words), None)


def load_agent_folder(folder: Path):
    """The AgentSpec for an AutoRL-Bench agent folder; UsageError saying what to fix."""
    folder = Path(folder).resolve()
    raw: dict = {}
    if (folder / CONFIG).exists():
        try:
            raw = yaml.safe_load((folder / CONFIG).read_text()) or {}
        except yaml.YAMLError as exc:
            raise UsageError(f"AutoRL-Bench agent {folder}: {CONFIG} is not valid YAML: {exc}") from None
        if not isinstance(raw, dict):
            raise UsageError(f"AutoRL-Bench agent {folder}: {CONFIG} must be a mapping (name, start, env_vars)")
    start = str(raw.get("start") or START_DEFAULT)
    script = (folder / start).resolve()
    if not script.is_file() or not script.is_relative_to(folder):
        raise UsageError(f"AutoRL-Bench agent {folder}: its start script {start!r} is not a file in the folder: "
                         f"add {START_DEFAULT} (or name yours in {CONFIG} `start:`)")
    env_vars = raw.get("env_vars") or {}
    if not isinstance(env_vars, dict):
        raise UsageError(f"AutoRL-Bench agent {folder}: `env_vars` must be a mapping of NAME: value")
    values = {str(k): str(v) for k, v in env_vars.items() if str(k) not in RESERVED_ENV}
    stack = _stack(folder, raw)
    names = list(values) + [str(n) for n in (raw.get("env") or [])]
    output_format = str(raw.get("output_format") or "text")
    if stack:
        output_format = str(raw.get("output_format") or STACKS[stack][0])
        builtin = builtin_agents_dir() / f"{STACKS[stack][1]}.yaml"
        if builtin.exists():
            names += load_agent_spec(builtin).env
    network = str(raw.get("network") or ("bridge" if stack else "none"))
    if network not in NETWORK_POLICIES:
        raise UsageError(f"AutoRL-Bench agent {folder}: network {network!r} must be one of {NETWORK_POLICIES}")
    # stdout and stderr together, as AutoRL-Bench's agent.log; pipefail keeps start.sh's exit code.
    command = ["bash", "-c", 'set -o pipefail; bash "$0" 2>&1 | tee -a agent.log', "{agent_dir}/" + start]
    if output_format not in known_output_formats():
        raise UsageError(f"AutoRL-Bench agent {folder}: output_format {output_format!r} unknown")
    calls = scan_script(script.read_text(errors="replace"))     # what it really needs beyond bash
    if stack in PIPELINE_CLIS and PIPELINE_CLIS[stack] not in calls.clis:
        calls.clis.append(PIPELINE_CLIS[stack])
    return AgentSpec(name=folder.name, command=command, source=script, description=str(raw.get("name") or ""),
                     env=list(dict.fromkeys(names)), output_format=output_format, network=network,
                     image=raw.get("image"), needs=["bash", *calls.clis], raw=raw, env_values=values,
                     grading_api="autorl-bench", script=calls.to_dict())
