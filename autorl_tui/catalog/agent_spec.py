"""One agent spec (an `agent.yaml`) read into an AgentSpec; the format is described in
catalog/agents.py. Kept apart from the search so that catalog/autorl_bench_agents.py can build the
same AgentSpec without importing the search that imports it."""

from __future__ import annotations

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
    script: dict[str, Any] = field(default_factory=dict)   # what an AutoRL-Bench start script calls (script_scan.py)

    @property
    def agent_dir(self) -> Path:
        return self.source.parent

    def to_dict(self) -> dict:
        return {"name": self.name, "command": self.command, "source": str(self.source),
                "description": self.description, "env": self.env, "output_format": self.output_format,
                "network": self.network, "image": self.image, "install": self.install,
                "driver": self.driver, "needs": self.needs, "grading_api": self.grading_api, "script": self.script}


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
