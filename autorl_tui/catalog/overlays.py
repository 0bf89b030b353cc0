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
    env_file: ~/RD-Agent/.env              # NAME=value lines passed as they are (AutoRL-Bench's `.env`)
    home_files:                            # agent home path: host file
      .codex/config.toml: ~/bench/codex-config.toml
    binds: [/srv/openhands-rl]             # read-only, at the same path inside the sandbox
    copies:                                # a private writable copy in the agent's home, the variable naming it
      OPENCODE_RL_ROOT: ~/opencode-rl
```
A bind or copy that would show the agent the engine's home (the store, other runs, cached held-out
splits), a task folder or the task's data, or the harness's own code is refused (`exposure`)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Mapping

from autorl_tui.catalog.autorl_bench import RESERVED_ENV
from autorl_tui.catalog.env_file import read_env_file
from autorl_tui.exitcodes import UsageError

KEYS = ("env", "env_file", "home_files", "binds", "copies")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_HOME_FILE_BYTES = 1024 * 1024
MAX_COPY_BYTES = 256 * 1024 * 1024      # a checkout copied per attempt: a pipeline's code, not its data
MAX_COPY_FILES = 20000


def parse_overlays(raw, where: str, base: Path) -> dict[str, dict]:
    """{agent name: {"env": [...], "env_file": absolute file | None, "home_files": {dest: absolute
    source}, "binds": [absolute dirs], "copies": {variable: absolute dir}}},
    checked whole: UsageError naming the entry and how to fix it. Relative host paths are taken
    from `base` (the plan's folder)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise UsageError(f"plan {where}: agent_overlays must map agent names to {{{', '.join(KEYS)}}}")
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
        binds = [_folder(b, base, f"{at}.binds") for b in spec.get("binds") or []]
        copies = {}
        for var, src in (spec.get("copies") or {}).items():
            if not _NAME.match(str(var)) or var in RESERVED_ENV:
                raise UsageError(f"{at}.copies: {var!r} must be a variable name the harness does not set "
                                 f"(the copy's path is passed in it)")
            copies[str(var)] = _folder(src, base, f"{at}.copies.{var}")
            _check_copy_size(Path(copies[str(var)]), f"{at}.copies.{var}")
        names = [Path(c).name for c in copies.values()]
        if len(set(names)) < len(names):
            raise UsageError(f"{at}.copies: two folders named alike ({', '.join(names)}); each is copied to the "
                             f"agent's home under its own name")
        env_file = None
        if spec.get("env_file"):
            env_file = (base / Path(str(spec["env_file"])).expanduser()).resolve()
            if not env_file.is_file():
                raise UsageError(f"{at}.env_file: {env_file} is not a file")
            read_env_file(env_file, RESERVED_ENV)         # checked now, read again at launch
            env_file = str(env_file)
        out[str(agent)] = {"env": env, "home_files": files, "binds": binds, "env_file": env_file, "copies": copies}
    return out


def _folder(raw, base: Path, at: str) -> str:
    folder = (base / Path(str(raw)).expanduser()).resolve()
    if not folder.is_dir():
        raise UsageError(f"{at}: {folder} is not a folder")
    if folder == Path("/"):
        raise UsageError(f"{at}: the whole filesystem cannot be given to an agent; name the checkout's folder")
    return str(folder)


def _check_copy_size(folder: Path, at: str) -> None:
    files = size = 0
    for root, _dirs, names in os.walk(folder):
        for n in names:
            files += 1
            try:
                size += os.lstat(os.path.join(root, n)).st_size
            except OSError:
                pass
        if files > MAX_COPY_FILES or size > MAX_COPY_BYTES:
            raise UsageError(f"{at}: {folder} is over {MAX_COPY_FILES} files or {MAX_COPY_BYTES >> 20} MiB, too "
                             f"much to copy for every run; bind it read-only (binds) or copy a smaller checkout")


def exposure(overlay: Mapping | None, protected: list[tuple[str, Path]], agent: str = "<agent>") -> str | None:
    """Why a bind or copy of `overlay` would show the agent what it must never see, or None:
    `protected` is (what, folder) pairs (the engine's home, task folders, the task's data, the
    harness's code); a folder that holds one of them or lies inside one is refused."""
    given = [("binds", b) for b in (overlay or {}).get("binds") or []]
    given += [(f"copies.{v}", c) for v, c in ((overlay or {}).get("copies") or {}).items()]
    for key, folder in given:
        mine = Path(os.path.realpath(folder))
        for what, path in protected:
            other = Path(os.path.realpath(path))
            if mine == other or other.is_relative_to(mine) or mine.is_relative_to(other):
                return (f"agent_overlays.{agent}.{key}: {folder} would show the agent {what} ({other}); "
                        f"give a folder that neither holds it nor lies inside it")
    return None


def overlay_env(overlay: Mapping | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables the overlay passes: its `env_file`'s, then the named ones from `environ` (a
    name in both takes the `env` value: the plan named it). UsageError naming those the harness's
    environment lacks, or a malformed env_file line."""
    names = list((overlay or {}).get("env") or [])
    unset = [n for n in names if n not in environ]
    if unset:
        raise UsageError(f"agent_overlays names {', '.join(unset)}, unset in the harness's environment: "
                         f"export {unset[0]}=... before starting the engine, or drop it from the plan")
    env_file = (overlay or {}).get("env_file")
    from_file = read_env_file(Path(env_file), RESERVED_ENV) if env_file else {}
    return {**from_file, **{n: environ[n] for n in names}}


def copy_targets(overlay: Mapping | None, home: Path) -> dict[str, str]:
    """{variable: where its copy lies in the agent's home}."""
    return {var: str(home / Path(src).name) for var, src in ((overlay or {}).get("copies") or {}).items()}


def place_copies(overlay: Mapping | None, home: Path) -> dict[str, str]:
    """Copy each of the overlay's `copies` afresh into the agent's home (links copied as links,
    whatever an earlier attempt left there removed first); returns copy_targets."""
    targets = copy_targets(overlay, home)
    for var, src in ((overlay or {}).get("copies") or {}).items():
        dest = Path(targets[var])
        if dest.is_symlink() or dest.is_file():
            dest.unlink()
        elif dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(src, dest, symlinks=True)
    return targets


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
