"""The task kit (autorl_tui/tasks/kit.py): the agent's `<task>_api/` package is written one way for
every interactive task, and what the built-in tasks copy into it is standalone (no harness import:
it runs in the agent's workspace, where the harness is not installed)."""
import ast
import importlib
import sys
from pathlib import Path

import pytest

from autorl_tui.grading import episodes as generic_runner
from autorl_tui.tasks import kit
from autorl_tui.tasks.alfworld import provider as alfworld
from autorl_tui.tasks.deepsearchqa import provider as deepsearchqa
from autorl_tui.tasks.webshop import provider as webshop


def test_the_package_holds_the_files_the_runner_and_the_promised_names(tmp_path, monkeypatch):
    src = tmp_path / "task"
    src.mkdir()
    (src / "game.py").write_text("class Game:\n    steps = 3\n")
    (src / "api.py").write_text("from .episodes import run_episodes\nfrom .game import Game\n\n"
                                "def play():\n    return Game.steps, run_episodes.__name__\n")
    (tmp_path / "split").mkdir()
    pkg = kit.agent_package(tmp_path / "split" / "toy_api", [src / "game.py", src / "api.py"],
                            {"api": ["play"], "game": ["Game"]}, "Toy episode runner")
    assert sorted(p.name for p in pkg.iterdir()) == ["__init__.py", "api.py", "episodes.py", "game.py"]
    assert (pkg / "episodes.py").read_bytes() == Path(generic_runner.__file__).read_bytes()
    assert (pkg / "__init__.py").read_text().startswith('"""Toy episode runner (the grader\'s own code).')
    monkeypatch.syspath_prepend(str(tmp_path / "split"))
    try:
        toy = importlib.import_module("toy_api")
        assert toy.play() == (3, "run_episodes") and toy.Game.steps == 3
    finally:
        for name in [n for n in sys.modules if n == "toy_api" or n.startswith("toy_api.")]:
            del sys.modules[name]


@pytest.mark.parametrize("provider", [alfworld, webshop, deepsearchqa], ids=["alfworld", "webshop", "deepsearchqa"])
def test_what_a_built_in_task_copies_imports_no_harness(provider):
    folder = Path(provider.__file__).parent
    assert "api.py" in provider.API_FILES
    for name in provider.API_FILES:
        tree = ast.parse((folder / name).read_text())
        for node in ast.walk(tree):
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            assert not any(m == "autorl_tui" or m.startswith("autorl_tui.") for m in mods), \
                f"{folder.name}/{name} imports {mods}: it is copied into the agent's workspace"
