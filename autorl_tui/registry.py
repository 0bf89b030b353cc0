"""The one plugin mechanism: named, lazily loaded objects of each kind, built-in or installed.

Every pluggable thing (a task folder, a scorer, an executor, an agent output parser, an inference
backend, a data provider, an interactive environment, a data generator, a built-in model, a CLI
command) is an *entry point*: a name and a `module:attribute` reference. Installed packages declare
theirs in their packaging metadata under the group `autorl_tui.<kind>`:

    [project.entry-points."autorl_tui.scorers"]
    my_scorer = "my_lab_tasks.scoring:MyScorer"
    [project.entry-points."autorl_tui.tasks"]
    my_lab = "my_lab_tasks:tasks_dir"          # a callable returning a folder of task folders

The harness's own built-ins are declared below in the same form and loaded by the same code
(`EntryPoint.load()`), so a built-in is never special: a lab's plugin is found, listed, validated
and loaded exactly like one. A plugin may not reuse a built-in's name (that would silently change a
shipped task's scores). This module imports nothing of ours: the references are only strings
until `load()`, which is what keeps the packages free of import cycles.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import re
import sys
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

GROUP_PREFIX = "autorl_tui."

# kind -> {name: "module:attribute"}; what each kind's object must be is documented in
# docs/ARCHITECTURE.md ("Plugins").
BUILTINS: dict[str, dict[str, str]] = {
    "tasks": {
        "builtin": "autorl_tui.tasks:builtin_tasks_dir",
    },
    "scorers": {
        "exact_match": "autorl_tui.grading.scorers.exact_match:ExactMatchScorer",
        "unit_tests": "autorl_tui.grading.scorers.unit_tests:UnitTestsScorer",
        "judge": "autorl_tui.grading.scorers.judge:JudgeScorer",
        "alpaca_eval": "autorl_tui.grading.scorers.alpaca_eval:AlpacaEvalScorer",
        "env_success": "autorl_tui.grading.scorers.env_success:EnvSuccessScorer",
        "deepsearchqa": "autorl_tui.tasks.deepsearchqa.scorer:DeepSearchQAScorer",
    },
    "executors": {
        "local": "autorl_tui.executors.local:LocalExecutor",
        "docker": "autorl_tui.executors.docker:DockerExecutor",
        "ray": "autorl_tui.executors.ray:RayExecutor",
    },
    "output_parsers": {
        "text": "autorl_tui.instrument.parsers.text:TextParser",
        "claude_stream_json": "autorl_tui.instrument.parsers.claude_stream_json:ClaudeStreamJsonParser",
        "codex_json": "autorl_tui.instrument.parsers.codex_json:CodexJsonParser",
        "gemini_stream_json": "autorl_tui.instrument.parsers.gemini_stream_json:GeminiStreamJsonParser",
        "opencode_json": "autorl_tui.instrument.parsers.opencode_json:OpencodeJsonParser",
        "openhands": "autorl_tui.instrument.parsers.openhands:OpenHandsParser",
        "react_json": "autorl_tui.instrument.parsers.react_json:ReactJsonParser",
    },
    "inference_backends": {
        "transformers": "autorl_tui.grading.inference:TransformersPolicy",
        "vllm": "autorl_tui.grading.inference:VLLMPolicy",
    },
    "data_providers": {
        "alfworld": "autorl_tui.tasks.alfworld.provider:materialize",
        "humaneval": "autorl_tui.tasks.humaneval.provider:materialize",
        "webshop": "autorl_tui.tasks.webshop.provider:materialize",
        "deepsearchqa": "autorl_tui.tasks.deepsearchqa.provider:materialize",
    },
    "environments": {
        "alfworld": "autorl_tui.tasks.alfworld.grader_env:AlfworldEnvironment",
        "deepsearchqa": "autorl_tui.tasks.deepsearchqa.grader_env:DeepSearchQAEnvironment",
        "webshop": "autorl_tui.tasks.webshop.grader_env:WebshopEnvironment",
    },
    "generators": {
        "arith": "autorl_tui.tasks.arith.generator:generate",
    },
    "item_normalizers": {
        "gsm8k": "autorl_tui.tasks.gsm8k.normalize:normalize",
    },
    "models": {
        "tiny": "autorl_tui.tasks.arith.tiny_model:build_tiny_model",
        "tiny-alfworld": "autorl_tui.tasks.alfworld.tiny_model:build",
        "tiny-webshop": "autorl_tui.tasks.webshop.tiny_model:build",
        "tiny-dsqa": "autorl_tui.tasks.deepsearchqa.tiny_model:build",
    },
    "commands": {
        **{name: f"autorl_tui.commands.{name}:register"
           for name in ("agents", "cancel", "compare", "data", "demo", "doctor", "engine", "export", "gpus", "models",
                        "report", "resume", "retry", "runs", "score", "tasks")},
        "import": "autorl_tui.commands.import_:register",   # `import` is a Python keyword
        "cluster": "autorl_tui.commands.cluster:register",
    },
}

KINDS = tuple(BUILTINS)


class PluginError(LookupError):
    """An unknown name, a malformed reference, or a plugin clashing with a built-in."""


def group(kind: str) -> str:
    if kind not in BUILTINS:
        raise PluginError(f"unknown plugin kind {kind!r}; kinds: {', '.join(KINDS)}")
    return GROUP_PREFIX + kind


@lru_cache(maxsize=1)
def _installed():
    """Every installed entry point, read once per process (one scan of sys.path's metadata)."""
    return entry_points()


@lru_cache(maxsize=None)
def entries(kind: str) -> dict[str, EntryPoint]:
    """Built-ins first, then installed plugins, by name (stable, sorted within each)."""
    grp = group(kind)
    found = {name: EntryPoint(name=name, value=value, group=grp) for name, value in BUILTINS[kind].items()}
    for ep in sorted(_installed().select(group=grp), key=lambda e: e.name):
        if ep.name in found and found[ep.name].value != ep.value:
            dist = getattr(ep.dist, "name", "an installed package")
            raise PluginError(f"{dist} declares {grp} {ep.name!r} = {ep.value!r}, but {ep.name!r} is "
                              f"already {found[ep.name].value!r}; rename the plugin's entry point")
        found[ep.name] = ep
    return found


def names(kind: str) -> list[str]:
    return sorted(entries(kind))


def load(kind: str, name: str) -> Any:
    """The object registered as `name` (imports its module now, not before)."""
    ep = entries(kind).get(name)
    if ep is None:
        raise PluginError(f"unknown {kind.rstrip('s').replace('_', ' ')} {name!r}; known: {', '.join(names(kind))}")
    return ep.load()


def resolve(kind: str, ref: str, folder: str | Path | None = None) -> Any:
    """A registered name, or a `module:attribute` reference loaded through the same
    `EntryPoint.load()`. With `folder` (a task's folder), a module that is a file or package in
    that folder (`scoring:MyScorer` -> `folder/scoring.py`) is loaded from there first, as a
    submodule of a package private to the folder, so the folder's modules may import each other
    relatively (`from .prompts import build`)."""
    if ref in entries(kind) or ":" not in ref:
        return load(kind, ref)
    module, _, attr = ref.partition(":")
    if folder is None or not _in_folder(Path(folder), module):
        return EntryPoint(name=ref, value=ref, group=group(kind)).load()
    ref = f"{folder_package(Path(folder))}.{module}:{attr}"
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True   # no __pycache__ in a task's folder
    try:
        return EntryPoint(name=ref, value=ref, group=group(kind)).load()
    finally:
        sys.dont_write_bytecode = saved


def _in_folder(folder: Path, module: str) -> bool:
    path = folder.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def folder_package(folder: Path) -> str:
    """The name of a package (created once per process) whose modules are the folder's files."""
    folder = folder.resolve()
    slug = re.sub(r"\W", "_", folder.name)
    name = f"autorl_task_folder_{slug}_{hashlib.sha256(str(folder).encode()).hexdigest()[:10]}"
    if name not in sys.modules:
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(folder)]
        sys.modules[name] = importlib.util.module_from_spec(spec)
    return name


def refresh() -> None:
    """Forget the cached scan (after installing a plugin into a running process)."""
    _installed.cache_clear()
    entries.cache_clear()
