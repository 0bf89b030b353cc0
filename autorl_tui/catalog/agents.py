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
folder, or named by its path, is read by catalog/autorl_bench.py into the same AgentSpec.

Placeholders in `command`: {agent_dir} (the folder holding the spec), {python} (the harness's
Python), {driver}, {driver_url}, {workspace}, {prompt_file}.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from autorl_tui import registry
from autorl_tui.exitcodes import UsageError

NETWORK_POLICIES = ("none", "bridge", "host")
GRADING_APIS = ("autorl-tui", "autorl-bench")


def known_output_formats() -> set[str]:
    """Formats with a registered stream parser (`autorl_tui/registry.py`, kind `output_parsers`)."""
    return set(registry.names("output_parsers"))


def builtin_agents_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "builtin" / "agents"


@dataclass
class AgentSpec:
    name: str
    command: str | list[str]
    source: Path
    description: str = ""
    env: list[str] = field(default_factory=list)
    output_format: str = "text"
    network: str = "none"
    image: str | None = None
    install: dict[str, Any] = field(default_factory=dict)
    driver: dict[str, Any] = field(default_factory=dict)
    needs: list[str] = field(default_factory=list)     # executables that must be on PATH
    raw: dict[str, Any] = field(default_factory=dict)
    env_values: dict[str, str] = field(default_factory=dict)   # defaults under the harness's values (AutoRL-Bench env_vars)
    grading_api: str = "autorl-tui"

    @property
    def agent_dir(self) -> Path:
        return self.source.parent

    def to_dict(self) -> dict:
        return {"name": self.name, "command": self.command, "source": str(self.source),
                "description": self.description, "env": self.env, "output_format": self.output_format,
                "network": self.network, "image": self.image, "install": self.install,
                "driver": self.driver, "needs": self.needs, "grading_api": self.grading_api}


def load_agent_spec(path: Path) -> AgentSpec:
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as exc:
        raise UsageError(f"agent spec {path} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"agent spec {path} must be a mapping")
    for key in ("name", "command"):
        if not raw.get(key):
            raise UsageError(f"agent spec {path} lacks `{key}`")
    env = raw.get("env") or []
    if not isinstance(env, list) or not all(isinstance(e, str) for e in env):
        raise UsageError(f"agent spec {path}: `env` must be a list of variable names, e.g. [OPENAI_API_KEY]")
    fmt = raw.get("output_format", "text")
    if fmt not in known_output_formats():
        raise UsageError(f"agent spec {path}: output_format {fmt!r} unknown; known: {sorted(known_output_formats())}")
    network = raw.get("network", "none")
    if network not in NETWORK_POLICIES:
        raise UsageError(f"agent spec {path}: network {network!r} must be one of {NETWORK_POLICIES}")
    grading_api = raw.get("grading_api", "autorl-tui")
    if grading_api not in GRADING_APIS:
        raise UsageError(f"agent spec {path}: grading_api {grading_api!r} must be one of {GRADING_APIS}")
    return AgentSpec(name=str(raw["name"]), command=raw["command"], source=Path(path).resolve(),
                     description=str(raw.get("description", "")), env=env, output_format=fmt,
                     network=network, image=raw.get("image"), install=dict(raw.get("install") or {}),
                     driver=dict(raw.get("driver") or {}), needs=list(raw.get("needs") or []), raw=raw,
                     grading_api=grading_api)


def agent_search_path(extra: list[Path] | None = None, home_root: Path | None = None) -> list[Path]:
    paths = [Path(p) for p in (extra or [])]
    if home_root is not None:
        paths.append(home_root / "agents")
    paths.append(builtin_agents_dir())
    return paths


def _spec_files(root: Path):
    """Spec YAML files and AutoRL-Bench agent folders (the root itself, or its subfolders)."""
    from autorl_tui.catalog.autorl_bench import is_agent_folder

    if not root.is_dir():
        return
    if is_agent_folder(root):
        yield root
        return
    yield from sorted(root.glob("*.yaml"))
    yield from sorted(root.glob("*/agent.yaml"))
    yield from sorted(d for d in root.iterdir() if is_agent_folder(d))


def _load(path: Path) -> AgentSpec:
    from autorl_tui.catalog.autorl_bench import load_agent_folder

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
    from autorl_tui.catalog.autorl_bench import CONFIG, START_DEFAULT, load_agent_folder

    if candidate.is_dir() and ((candidate / START_DEFAULT).exists() or (candidate / CONFIG).exists()):
        return load_agent_folder(candidate)     # an AutoRL-Bench folder by path: its own error if broken
    broken = f"; {len(errors)} spec(s) could not be loaded: {' | '.join(errors)}" if errors else ""
    raise UsageError(f"unknown agent {name!r}; known agents: {', '.join(sorted(agents)) or 'none'} "
                     f"(searched {', '.join(map(str, search_path))}; or give a path to a spec .yaml or to an AutoRL-Bench agent "
                     f"folder with start.sh){broken}")


def passthrough_env(spec: AgentSpec, environ: dict[str, str] | None = None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    return {**spec.env_values, **{k: environ[k] for k in spec.env if k in environ}}
