"""Agent specs: YAML files describing how to launch an agent. Built-in specs live in
`autorl_tui/builtin/agents/`; user specs in the home's `agents/` folder or `--agents-dir`.

    name: my-agent
    description: one line
    command: python {agent_dir}/my_agent.py      # run in the workspace; a string (shell) or a list
    env: [OPENAI_API_KEY, OPENAI_BASE_URL]       # names passed through from the harness environment
    output_format: text                          # how stdout is parsed (text; JSON streams in later specs)
    network: none                                # container network policy: none | bridge | host
    image: null                                  # container image (docker executor)
    install: {npm: [...], pip: [...]}            # how to install it (shown by `doctor`)
    driver: {required: false, env: MODEL}        # driver LLM parameter
    grading_api: autorl-tui                      # or autorl-bench: a failed grading answers 200, score 0.0

An AutoRL-Bench agent folder (`start.sh` + `config.yaml`, no agent.yaml) found in a search-path
folder, or named by its path, is read by catalog/autorl_bench_agents.py into the same AgentSpec.

Placeholders in `command`: {agent_dir} (the folder holding the spec), {python} (the harness's
Python), {driver}, {driver_url}, {workspace}, {prompt_file}.
"""

from __future__ import annotations

import os
from pathlib import Path

from autorl_tui.catalog.agent_spec import (GRADING_APIS, NETWORK_POLICIES, AgentSpec, builtin_agents_dir,
                                           known_output_formats, load_agent_spec)
from autorl_tui.catalog.autorl_bench_agents import CONFIG, START_DEFAULT, is_agent_folder, load_agent_folder
from autorl_tui.exitcodes import UsageError

__all__ = ["GRADING_APIS", "NETWORK_POLICIES", "AgentSpec", "agent_search_path", "builtin_agents_dir", "find_agent",
           "known_output_formats", "list_agents", "load_agent_spec", "passthrough_env"]


def agent_search_path(extra: list[Path] | None = None, home_root: Path | None = None) -> list[Path]:
    paths = [Path(p) for p in (extra or [])]
    if home_root is not None:
        paths.append(home_root / "agents")
    paths.append(builtin_agents_dir())
    return paths


def _spec_files(root: Path):
    """Spec YAML files and AutoRL-Bench agent folders (the root itself, or its subfolders)."""
    if not root.is_dir():
        return
    if is_agent_folder(root):
        yield root
        return
    yield from sorted(root.glob("*.yaml"))
    yield from sorted(root.glob("*/agent.yaml"))
    yield from sorted(d for d in root.iterdir() if is_agent_folder(d))


def _load(path: Path) -> AgentSpec:
    return load_agent_folder(path) if path.is_dir() else load_agent_spec(path)


def list_agents(search_path: list[Path], errors: list[str] | None = None) -> dict[str, AgentSpec]:
    """Specs by name (first found wins). Specs that fail to load are reported in `errors`."""
    found: dict[str, AgentSpec] = {}
    for root in search_path:
        for f in _spec_files(root):
            try:
                spec = _load(f)
            except UsageError as exc:
                if errors is not None:
                    errors.append(str(exc))
                continue
            found.setdefault(spec.name, spec)
    return found


def find_agent(name: str, search_path: list[Path]) -> AgentSpec:
    errors: list[str] = []
    agents = list_agents(search_path, errors)
    if name in agents:
        return agents[name]
    candidate = Path(name)
    if candidate.suffix in (".yaml", ".yml") and candidate.exists():
        return load_agent_spec(candidate)
    if candidate.is_dir() and ((candidate / START_DEFAULT).exists() or (candidate / CONFIG).exists()):
        return load_agent_folder(candidate)     # an AutoRL-Bench folder by path: its own error if broken
    broken = f"; {len(errors)} spec(s) could not be loaded: {' | '.join(errors)}" if errors else ""
    raise UsageError(f"unknown agent {name!r}; known agents: {', '.join(sorted(agents)) or 'none'} "
                     f"(searched {', '.join(map(str, search_path))}; or give a path to a spec .yaml or to an AutoRL-Bench agent "
                     f"folder with start.sh){broken}")


def passthrough_env(spec: AgentSpec, environ: dict[str, str] | None = None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    return {**spec.env_values, **{k: environ[k] for k in spec.env if k in environ}}
