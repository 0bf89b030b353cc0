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

from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
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
        "env_success": "autorl_tui.grading.scorers.env_success:EnvSuccessScorer",
    },
    "executors": {
        "local": "autorl_tui.engine.executors.local:LocalExecutor",
        "docker": "autorl_tui.engine.executors.docker:DockerExecutor",
    },
    "output_parsers": {
        "text": "autorl_tui.engine.instrument.parsers.text:TextParser",
        "claude_stream_json": "autorl_tui.engine.instrument.parsers.claude_stream_json:ClaudeStreamJsonParser",
        "codex_json": "autorl_tui.engine.instrument.parsers.codex_json:CodexJsonParser",
        "gemini_stream_json": "autorl_tui.engine.instrument.parsers.gemini_stream_json:GeminiStreamJsonParser",
        "opencode_json": "autorl_tui.engine.instrument.parsers.opencode_json:OpencodeJsonParser",
        "openhands": "autorl_tui.engine.instrument.parsers.openhands:OpenHandsParser",
        "react_json": "autorl_tui.engine.instrument.parsers.react_json:ReactJsonParser",
    },
    "inference_backends": {
        "transformers": "autorl_tui.grading.inference:TransformersPolicy",
        "vllm": "autorl_tui.grading.inference:VLLMPolicy",
    },
    "data_providers": {
        "alfworld": "autorl_tui.tasks.alfworld.provider:materialize",
        "humaneval": "autorl_tui.tasks.humaneval.provider:materialize",
    },
    "environments": {
        "alfworld": "autorl_tui.tasks.alfworld.environment:AlfworldEnvironment",
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
    },
    "commands": {
        **{name: f"autorl_tui.commands.{name}:register"
           for name in ("agents", "compare", "demo", "doctor", "engine", "export", "gpus", "models",
                        "report", "resume", "retry", "runs", "score", "tasks")},
        "import": "autorl_tui.commands.import_:register",   # `import` is a Python keyword
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


def resolve(kind: str, ref: str) -> Any:
    """A registered name, or (for cards written before names existed) a `module:attribute`
    reference, loaded through the same `EntryPoint.load()`."""
    if ref in entries(kind) or ":" not in ref:
        return load(kind, ref)
    return EntryPoint(name=ref, value=ref, group=group(kind)).load()


def refresh() -> None:
    """Forget the cached scan (after installing a plugin into a running process)."""
    _installed.cache_clear()
    entries.cache_clear()
