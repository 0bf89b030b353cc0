"""The one plugin mechanism: named, lazily loaded objects of each kind, built-in or installed.

Every pluggable thing (a task folder, a scorer, an executor, an agent output parser, an inference
backend, a data provider, an interactive environment, a data generator, a built-in model, a CLI
command) is an *entry point*: a name and a `module:attribute` reference. Installed packages declare
theirs in their packaging metadata under the group `autorl_tui.<kind>`:

    [project.entry-points."autorl_tui.scorers"]
    my_scorer = "my_lab_tasks.scoring:MyScorer"
    [project.entry-points."autorl_tui.tasks"]
    my_lab = "my_lab_tasks:tasks_dir"          # a callable returning a folder of task folders

A task folder declares the plugins its code provides in its card (`provides:`, the module a file
of the folder: `models: {tiny-alfworld: "tiny_model:build"}`); the folders of every `tasks` plugin
(the built-in ones included) are read for them, so no task has a central entry here.

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
    # declared by task folders (their cards' `provides:`), none built in here
    "data_providers": {},
    "environments": {},
    "generators": {},
    "item_normalizers": {},
    "models": {},
    "commands": {
        **{name: f"autorl_tui.commands.{name}:register"
           for name in ("agents", "cancel", "compare", "data", "demo", "doctor", "engine", "export", "gpus", "models",
                        "report", "resume", "retry", "runs", "score", "store", "tasks")},
        "import": "autorl_tui.commands.import_:register",   # `import` is a Python keyword
        "cluster": "autorl_tui.commands.cluster:register",
    },
}

KINDS = tuple(BUILTINS)
# the kinds a task folder may provide (`provides:` in its card)
FOLDER_KINDS = ("scorers", "data_providers", "environments", "generators", "item_normalizers", "models")
CARD = "task.yaml"


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


def _task_roots() -> list[Path]:
    roots = []
    for name in sorted(entries("tasks")):
        try:
            roots.append(Path(entries("tasks")[name].load()()))
        except Exception as exc:   # a broken tasks plugin is reported where tasks are listed
            print(f"autorl-tui: tasks plugin {name!r} could not be loaded ({exc}); its folders' plugins are skipped",
                  file=sys.stderr)
    return roots


@lru_cache(maxsize=1)
def folder_declared() -> dict[str, dict[str, tuple[str, Path]]]:
    """kind -> {name: (module:attribute, the task folder declaring it)} from the cards of every
    `tasks` plugin's folders. A name two folders declare differently is an error."""
    import yaml

    found: dict[str, dict[str, tuple[str, Path]]] = {kind: {} for kind in FOLDER_KINDS}
    for root in _task_roots():
        for card in sorted(root.glob(f"*/{CARD}")):
            try:
                provides = (yaml.safe_load(card.read_text()) or {}).get("provides") or {}
            except (OSError, yaml.YAMLError, AttributeError):
                continue                   # the card's own checks report it (`tasks validate`)
            for kind, declared in provides.items():
                if kind not in found or not isinstance(declared, dict):
                    raise PluginError(f"{card}: provides.{kind} is not a plugin kind a task folder may provide "
                                      f"({', '.join(FOLDER_KINDS)}); fix the card")
                for name, ref in declared.items():
                    value = folder_module_ref(card.parent, str(ref))
                    if name in found[kind] and found[kind][name][0] != value:
                        raise PluginError(f"{card}: provides {kind} {name!r}, already provided by "
                                          f"{found[kind][name][1]}; rename one")
                    found[kind][str(name)] = (value, card.parent)
    return found


def folder_module_ref(folder: Path, ref: str) -> str:
    """`module:attr` of a task folder's file as an importable reference: through the package the
    folder is part of when it is one (a built-in task), else a package private to the folder."""
    module, _, attr = ref.partition(":")
    if not _in_folder(folder, module):
        return ref
    return f"{_package_of(folder.resolve())}.{module}:{attr}"


def _package_of(folder: Path) -> str:
    parts: list[str] = []
    here = folder
    while (here / "__init__.py").is_file() and re.fullmatch(r"[A-Za-z_]\w*", here.name):
        parts.insert(0, here.name)
        here = here.parent
    if parts:
        dotted = ".".join(parts)
        spec = importlib.util.find_spec(dotted)
        if spec is not None and folder in {Path(p).resolve() for p in spec.submodule_search_locations or []}:
            return dotted
    return folder_package(folder)


@lru_cache(maxsize=None)
def entries(kind: str) -> dict[str, EntryPoint]:
    """Built-ins first (with what task folders provide), then installed plugins, by name."""
    grp = group(kind)
    found = {name: EntryPoint(name=name, value=value, group=grp) for name, value in BUILTINS[kind].items()}
    if kind in FOLDER_KINDS:
        for name, (value, folder) in sorted(folder_declared()[kind].items()):
            if name in found and found[name].value != value:
                raise PluginError(f"task folder {folder} provides {kind} {name!r}, a built-in name; rename it")
            found[name] = EntryPoint(name=name, value=value, group=grp)
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
        try:
            return EntryPoint(name=ref, value=ref, group=group(kind)).load()
        except ModuleNotFoundError as exc:
            if folder is None or "." in module or exc.name != module:
                raise
            raise PluginError(f"{kind.rstrip('s').replace('_', ' ')} {ref!r}: {Path(folder) / module}.py does not "
                              f"exist (a task card copied without its folder's code?): copy the task folder's "
                              f"code beside the card, or name the plugin by its registered name; known: "
                              f"{', '.join(names(kind))}") from None
    ref = folder_module_ref(Path(folder), ref)
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
    folder_declared.cache_clear()
