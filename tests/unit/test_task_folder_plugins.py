"""A task folder declares the plugins its code provides (`provides:` in its card): the registry
holds no per-task entry, and a folder's declarations load like built-ins (issue 33, task kit)."""
import textwrap

import pytest

from autorl_tui import registry


@pytest.fixture
def roots(monkeypatch):
    """The folders of task folders the registry reads (normally every `tasks` plugin's)."""
    chosen: list = []
    monkeypatch.setattr(registry, "_task_roots", lambda: list(chosen))
    registry.refresh()
    yield chosen
    monkeypatch.undo()
    registry.refresh()


def _task(root, name, provides: str, files: dict[str, str]):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "task.yaml").write_text(f"id: {name}\nprovides:\n" + textwrap.indent(textwrap.dedent(provides), "  "))
    for fname, text in files.items():
        (folder / fname).write_text(textwrap.dedent(text))
    return folder


def test_the_registry_names_no_task():
    central = [f"{kind}:{name}" for kind, found in registry.BUILTINS.items() for name, ref in found.items()
               if ref.startswith("autorl_tui.tasks.") and kind != "tasks"]
    assert central == []
    # the built-in tasks' plugins are still there, declared by their folders
    assert {"tiny", "tiny-alfworld", "tiny-webshop", "tiny-dsqa"} <= set(registry.names("models"))
    assert {"alfworld", "webshop", "deepsearchqa"} <= set(registry.names("environments"))
    assert registry.entries("environments")["alfworld"].value == "autorl_tui.tasks.alfworld.grader_env:AlfworldEnvironment"


def test_a_folder_s_declarations_load_by_name(tmp_path, roots):
    _task(tmp_path, "toy", "models: {toy-model: tiny:build}\n",
          {"tiny.py": "from .sizes import HIDDEN\n\ndef build(out_dir, seed=0, force=False):\n    return HIDDEN\n",
           "sizes.py": "HIDDEN = 48\n"})
    roots.append(tmp_path)
    registry.refresh()
    assert "toy-model" in registry.names("models")
    assert registry.load("models", "toy-model")(tmp_path) == 48      # the folder's files import each other


def test_two_folders_providing_one_name_are_refused(tmp_path, roots):
    for name in ("one", "two"):
        _task(tmp_path, name, "models: {shared: tiny:build}\n", {"tiny.py": "def build(*a, **k):\n    return 1\n"})
    roots.append(tmp_path)
    registry.refresh()
    with pytest.raises(registry.PluginError, match="already provided by"):
        registry.names("models")


def test_a_folder_may_not_take_a_built_in_name_or_an_unknown_kind(tmp_path, roots):
    _task(tmp_path / "a", "clash", "scorers: {exact_match: mine:Scorer}\n", {"mine.py": "class Scorer:\n    pass\n"})
    roots.append(tmp_path / "a")
    registry.refresh()
    with pytest.raises(registry.PluginError, match="a built-in name"):
        registry.names("scorers")
    roots.clear()
    _task(tmp_path / "b", "odd", "executors: {k8s: k8s:K8s}\n", {})
    roots.append(tmp_path / "b")
    registry.refresh()
    with pytest.raises(registry.PluginError, match="not a plugin kind a task folder may provide"):
        registry.names("models")


def test_a_card_copied_without_its_folders_code_is_told_what_to_do(tmp_path):
    """A shipped card copied alone into a user's tasks folder names `provider:materialize`, a file
    it does not have: one clear PluginError (the CLI's exit 2), not a ModuleNotFoundError."""
    folder = tmp_path / "webshop"
    folder.mkdir()
    with pytest.raises(registry.PluginError) as caught:
        registry.resolve("data_providers", "provider:materialize", folder)
    message = str(caught.value)
    assert str(folder / "provider.py") in message and "registered name" in message and "webshop" in message
    with pytest.raises(ModuleNotFoundError):          # a dotted module that is missing is not a folder's file
        registry.resolve("data_providers", "no_such_pkg.mod:f", folder)
