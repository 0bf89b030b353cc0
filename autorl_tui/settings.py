"""The harness's settings from `AUTORL_*` environment variables: one typed, frozen object.

    from autorl_tui import settings
    settings.current().home          # Path | None
    settings.current().warm_grader   # bool

Every variable is parsed here and nowhere else, once per distinct environment (`current()` caches on
the variables' values, so a test's monkeypatch or the CLI setting one for its graders is seen, and
nothing is parsed twice). A bad value is a `UsageError` naming the variable, the value and what it
takes. The table of variables is docs/settings.md (tests/unit/test_settings.py keeps the two equal).

Three `AUTORL_*` names are not settings but channels from a parent process to its child
(`AUTORL_CODE_SANDBOX_FD`, `AUTORL_SANDBOX_PACKAGES`) or from the engine to its Ray nodes
(`AUTORL_ENGINE_CODE`); they stay with the code on both ends.
A leaf module: it imports nothing of ours but `exitcodes`.
"""
from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from autorl_tui.exitcodes import UsageError

# Not settings: file descriptors and package folders handed from a parent process to its child, and
# the engine's code identity shipped to its Ray nodes (executors/ray_runtime.py).
INTERNAL = ("AUTORL_CODE_SANDBOX_FD", "AUTORL_SANDBOX_PACKAGES", "AUTORL_ENGINE_CODE")
GITHUB_DEFAULT = "https://raw.githubusercontent.com"


def _path(name: str, text: str) -> Path:
    return Path(text).expanduser()


def _paths(name: str, text: str) -> tuple[Path, ...]:
    return tuple(Path(x).expanduser() for x in text.split(os.pathsep) if x)


def _text(name: str, text: str) -> str:
    return text


def _seconds(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:   # also NaN
        raise UsageError(f"{name}={text!r} is not a number of seconds: set it to one, e.g. {name}=30 (0 turns it off)")
    return value


def _count(name: str, text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"{name}={text!r} is not a positive whole number: set it to 1 or more, or unset it")
    return int(text)


def _switch(name: str, text: str) -> bool:
    t = text.strip().lower()
    if t in ("1", "true", "yes", "on"):
        return True
    if t in ("0", "false", "no", "off"):
        return False
    raise UsageError(f"{name}={text!r} is not a switch: set it to 1 (on) or 0 (off)")


@dataclass(frozen=True)
class Settings:
    # Each field's variable and parser: VARIABLES below.
    home: Path | None = None
    store: str | None = None          # a file, or a folder holding store.db (store_location.requested_path)
    tasks_dirs: tuple[Path, ...] = ()
    agent_runtime: Path | None = None
    judge_url: str | None = None
    judge_cache: Path | None = None
    grader_memory: str | None = None
    warm_grader: bool = True
    grader_cuda_warmup: bool = True
    bwrap: str | None = None
    device_root: Path | None = None
    api_host: str | None = None
    github_endpoint: str = GITHUB_DEFAULT
    templates: tuple[Path, ...] = ()
    plain_heartbeat_s: float = 30.0
    alfworld_parse_cache: bool = True
    grading_slots: int | None = None
    test_network_fs: tuple[Path, ...] = ()

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        values: dict[str, Any] = {}
        for f in fields(cls):
            var, parse = VARIABLES[f.name]
            text = environ.get(var)
            if text is None or not text.strip():
                continue          # unset or empty: the default
            values[f.name] = parse(var, text.strip())
        return cls(**values)


# field -> (environment variable, parser). AUTORL_ALFWORLD_NO_PARSE_CACHE=1 turns the cache off.
VARIABLES = {
    "home": ("AUTORL_HOME", _path),
    "store": ("AUTORL_STORE", _text),
    "tasks_dirs": ("AUTORL_TASKS_DIR", _paths),
    "agent_runtime": ("AUTORL_AGENT_RUNTIME", _path),
    "judge_url": ("AUTORL_JUDGE_URL", _text),
    "judge_cache": ("AUTORL_JUDGE_CACHE", _path),
    "grader_memory": ("AUTORL_GRADER_MEMORY", _text),
    "warm_grader": ("AUTORL_WARM_GRADER", _switch),
    "grader_cuda_warmup": ("AUTORL_GRADER_CUDA_WARMUP", _switch),
    "bwrap": ("AUTORL_BWRAP", _text),
    "device_root": ("AUTORL_DEVICE_ROOT", _path),
    "api_host": ("AUTORL_API_HOST", _text),
    "github_endpoint": ("AUTORL_GITHUB_ENDPOINT", _text),
    "templates": ("AUTORL_TEMPLATES", _paths),
    "plain_heartbeat_s": ("AUTORL_PLAIN_HEARTBEAT_S", _seconds),
    "alfworld_parse_cache": ("AUTORL_ALFWORLD_NO_PARSE_CACHE", lambda name, text: not _switch(name, text)),
    "grading_slots": ("AUTORL_GRADING_SLOTS", _count),
    "test_network_fs": ("AUTORL_TEST_NETWORK_FS", _paths),
}


def exported(field_names: tuple[str, ...]) -> dict[str, str]:
    """The variables of these fields as this process has them set (for another process's
    environment: a Ray node's, executors/ray_runtime.py)."""
    names = [VARIABLES[f][0] for f in field_names]
    return {n: os.environ[n] for n in names if os.environ.get(n, "").strip()}


def variable(field_name: str) -> str:
    """The environment variable behind a field (for messages: "set AUTORL_BWRAP to ...")."""
    return VARIABLES[field_name][0]


@functools.lru_cache(maxsize=8)
def _parsed(items: tuple[tuple[str, str], ...]) -> Settings:
    return Settings.from_environ(dict(items))


def current() -> Settings:
    """The settings of this process's environment now (parsed once per distinct set of values)."""
    names = [var for var, _ in VARIABLES.values()]
    return _parsed(tuple((n, os.environ[n]) for n in names if n in os.environ))
