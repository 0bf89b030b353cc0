"""What the operator supplies to an agent folder from outside it (a plan's `agent_overlays`), the
way an AutoRL-Bench user's own shell supplies it there (docs/autorl-bench.md): named variables
from the operator's environment, files placed in the agent's home (a Codex `config.toml`,
Gemini's settings and trusted-folder list), and host folders bound read-only into the sandbox (an
external pipeline checkout). Each is declared by name or path, recorded in the run spec and shown
in the run report; the harness's whole environment is never passed.

```yaml
agent_overlays:
  codex:                                   # the agent's name, as `agents:` lists it (a folder's id)
    env: [LITELLM_API_KEY, CODEX_PROVIDER] # passed from the harness's environment, by name
    home_files:                            # agent home path: host file
      .codex/config.toml: ~/bench/codex-config.toml
    binds: [/srv/openhands-rl]             # read-only, at the same path inside the sandbox
```"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping

from autorl_tui.catalog.autorl_bench import RESERVED_ENV
from autorl_tui.exitcodes import UsageError

KEYS = ("env", "home_files", "binds")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_HOME_FILE_BYTES = 1024 * 1024


def parse_overlays(raw, where: str, base: Path) -> dict[str, dict]:
    """{agent name: {"env": [...], "home_files": {dest: absolute source}, "binds": [absolute dirs]}},
    checked whole: UsageError naming the entry and how to fix it. Relative host paths are taken
    from `base` (the plan's folder)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UsageError(f"plan {where}: agent_overlays must map agent names to {{env, home_files, binds}}")
    out = {}
    for agent, spec in raw.items():
        at = f"plan {where}: agent_overlays.{agent}"
        if not isinstance(spec, dict) or set(spec) - set(KEYS):
            raise UsageError(f"{at} must be a mapping with keys {', '.join(KEYS)}")
        env = [str(n) for n in spec.get("env") or []]
        for n in env:
            if not _NAME.match(n):
                raise UsageError(f"{at}.env: {n!r} is not a variable name")
            if n in RESERVED_ENV:
                raise UsageError(f"{at}.env: {n} is the harness's own (the workspace contract sets it)")
        files = {}
        for dest, src in (spec.get("home_files") or {}).items():
            rel = Path(str(dest))
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                raise UsageError(f"{at}.home_files: {dest!r} must be a path inside the agent's home, e.g. .codex/config.toml")
            source = (base / Path(str(src)).expanduser()).resolve()
            if not source.is_file():
                raise UsageError(f"{at}.home_files.{dest}: {source} is not a file")
            if source.stat().st_size > MAX_HOME_FILE_BYTES:
                raise UsageError(f"{at}.home_files.{dest}: {source} is over {MAX_HOME_FILE_BYTES} bytes")
            files[str(rel)] = str(source)
        binds = []
        for b in spec.get("binds") or []:
            folder = (base / Path(str(b)).expanduser()).resolve()
            if not folder.is_dir():
                raise UsageError(f"{at}.binds: {folder} is not a folder")
            if folder == Path("/"):
                raise UsageError(f"{at}.binds: the whole filesystem cannot be bound; name the checkout's folder")
            binds.append(str(folder))
        out[str(agent)] = {"env": env, "home_files": files, "binds": binds}
    return out


def overlay_env(overlay: Mapping | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The named variables' values; UsageError naming those the harness's environment lacks."""
    names = list((overlay or {}).get("env") or [])
    unset = [n for n in names if n not in environ]
    if unset:
        raise UsageError(f"agent_overlays names {', '.join(unset)}, unset in the harness's environment: "
                         f"export {unset[0]}=... before starting the engine, or drop it from the plan")
    return {n: environ[n] for n in names}


def place_home_files(overlay: Mapping | None, home: Path) -> list[str]:
    """Copy the overlay's files into the agent's home (its `HOME`), replacing what is there; returns
    the paths placed. The home is the agent's to write, so each is written fresh, never through a link."""
    placed = []
    for dest, src in ((overlay or {}).get("home_files") or {}).items():
        target = home / dest
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()
        data = Path(src).read_bytes()
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        placed.append(dest)
    return placed
