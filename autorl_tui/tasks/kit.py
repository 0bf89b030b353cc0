"""What interactive tasks share (ALFWorld, WebShop, DeepSearchQA; a seventh one too): the agent's
episode-runner package in the train split.

An interactive task folder holds a one-episode engine (`game.py`, `shop.py`, `tool_loop.py`), its
prompts, its hooks over the grader's generic batched runner (`api.py`, importing the runner as
`.episodes`: the folder's `episodes.py` re-exports `grading/episodes.py`), the grader's adapter
(`grader_env.py`, an `InteractiveEnvironment`), a provider and its built-in model. The provider
copies the standalone files into the workspace as the package `<task>_api/`, beside the generic
runner as `episodes.py`, so an agent's rollouts run the grader's own code: `agent_package` below.
"""
from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from autorl_tui.grading import episodes as generic_runner

RUNNER_NAME = "episodes.py"


def agent_package(folder: Path, files: Iterable[Path], exports: Mapping[str, Sequence[str]], title: str) -> Path:
    """Write `folder` (e.g. `<split>/alfworld_api`): a copy of each of `files` (standalone modules
    that import each other relatively), the generic runner as `episodes.py`, and an `__init__.py`
    importing `exports` ({module: [names]}), the names the task's description promises."""
    folder.mkdir(exist_ok=True)
    for source in files:
        shutil.copy2(source, folder / Path(source).name)
    shutil.copy2(generic_runner.__file__, folder / RUNNER_NAME)
    lines = [f'"""{title} (the grader\'s own code). See api.py."""']
    lines += [f"from .{module} import {', '.join(names)}  # noqa: F401" for module, names in exports.items()]
    (folder / "__init__.py").write_text("\n".join(lines) + "\n")
    return folder

