"""scripts/carve_engine.py, the codemod that carved engine/ (issue 33): this tree is carved (running
it again would change nothing), and a tree written against the old layout (another branch) is
carried over: files moved with git, imports split by new package, relative imports, __file__
depths, paths in docs and tests, the import-linter layers; a second run changes nothing."""
import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "carve_engine.py"


def _codemod():
    spec = importlib.util.spec_from_file_location("carve_engine", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_this_tree_is_carved():
    carve = _codemod()
    assert carve.plan_moves(REPO) == []
    stale = []
    for folder, pattern in (("autorl_tui", "*.py"), ("tests", "*.py"), ("docs", "*.md"), ("benchmarks", "*.py")):
        for path in (REPO / folder).rglob(pattern):
            text = path.read_text(errors="replace")
            if str(path.relative_to(REPO)) not in carve.KEEP and carve.rewrite_paths(carve.rewrite_dotted(text)) != text:
                stale.append(str(path.relative_to(REPO)))
    for name in ("pyproject.toml", "mypy.ini", "ruff.toml", "Makefile", "README.md"):
        text = (REPO / name).read_text()
        if carve.rewrite_paths(carve.rewrite_dotted(text)) != text:
            stale.append(name)
    assert stale == [], f"files naming engine/ modules that moved (run scripts/carve_engine.py): {stale}"


def test_the_table_maps_modules_and_paths():
    carve = _codemod()
    assert carve.map_module("autorl_tui.engine.executors.sandbox_bwrap.UidLease") == "autorl_tui.isolation.sandbox_bwrap.UidLease"
    assert carve.map_module("autorl_tui.engine.executors.docker") == "autorl_tui.executors.docker"
    assert carve.map_module("autorl_tui.engine.engine") is None
    assert carve.rewrite_paths("see `engine/gpus.py` and executors/sandbox_net.py, engine/run_api.py") == \
        "see `executors/gpus.py` and isolation/sandbox_net.py, engine/run_api.py"
    assert carve.rewrite_paths('ROOT / "autorl_tui" / "engine" / "executors" / "container_init.py"') == \
        'ROOT / "autorl_tui" / "isolation" / "container_init.py"'


OLD_TREE = {
    "autorl_tui/__init__.py": "",
    "autorl_tui/engine/__init__.py": "",
    "autorl_tui/engine/engine.py": """\
        from autorl_tui.engine import gpus, scheduling
        from autorl_tui.engine.executors import base, sandbox_bwrap
        from autorl_tui.engine.executors.base import NAME


        def describe():
            return f"{gpus.WHAT} {scheduling.WHAT} {base.WHAT} {sandbox_bwrap.WHAT} {NAME}"
        """,
    "autorl_tui/engine/scheduling.py": 'WHAT = "scheduling"\n',
    "autorl_tui/engine/gpus.py": 'WHAT = "gpus"\n',
    "autorl_tui/engine/added_by_a_branch.py": """\
        from autorl_tui.engine.executors.local import ROOT
        """,
    "autorl_tui/engine/executors/__init__.py": "",
    "autorl_tui/engine/executors/base.py": 'WHAT, NAME = "base", "local"\n',
    "autorl_tui/engine/executors/sandbox_bwrap.py": 'WHAT = "bwrap"\n',
    "autorl_tui/engine/executors/local.py": """\
        from pathlib import Path

        from .base import NAME
        from .sandbox_bwrap import WHAT

        ROOT = Path(__file__).resolve().parents[3]
        """,
    "autorl_tui/tasks/__init__.py": "",
    "autorl_tui/tasks/deepsearchqa/__init__.py": "",
    "autorl_tui/tasks/deepsearchqa/env.py": 'WHAT = "one episode"\n',
    "autorl_tui/tasks/deepsearchqa/tiny_model.py": """\
        from autorl_tui.tasks.deepsearchqa import env as E
        from .env import WHAT
        FILES = ("env.py", "prompts.py")
        """,
    "tests/test_old.py": """\
        from pathlib import Path
        INIT = Path(__file__).parents[1] / "autorl_tui" / "engine" / "executors" / "sandbox_bwrap.py"
        PATCH = "autorl_tui.engine.gpus.WHAT"
        """,
    "docs/x.md": "The sandbox (`executors/sandbox_bwrap.py`, `autorl_tui/engine/gpus.py`) and `engine/engine.py`.\n",
    "pyproject.toml": """\
        [[tool.importlinter.contracts]]
        id = "layers"
        type = "layers"
        layers = [
            "autorl_tui.cli",
            "autorl_tui.tui",
            "autorl_tui.engine | autorl_tui.reports",
            "autorl_tui.grading",
        ]
        """,
}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


@pytest.mark.subprocess
def test_a_tree_written_against_the_old_layout_is_carried_over(tmp_path):
    root = tmp_path / "checkout"
    for rel, text in OLD_TREE.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "old layout")

    run = subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "move autorl_tui/engine/executors/sandbox_bwrap.py -> autorl_tui/isolation/sandbox_bwrap.py" in run.stdout
    assert not (root / "autorl_tui/engine/executors").exists()
    assert (root / "autorl_tui/engine/added_by_a_branch.py").exists()       # not in the table: stays
    assert "R  autorl_tui/engine/gpus.py -> autorl_tui/executors/gpus.py" in _git(root, "status", "--short")

    engine = (root / "autorl_tui/engine/engine.py").read_text()
    assert "from autorl_tui.executors import gpus\nfrom autorl_tui.engine import scheduling\n" in engine
    assert "from autorl_tui.executors import base\nfrom autorl_tui.isolation import sandbox_bwrap\n" in engine
    local = (root / "autorl_tui/executors/local.py").read_text()
    assert "from .base import NAME" in local                            # same package: kept relative
    assert "from autorl_tui.isolation.sandbox_bwrap import WHAT" in local
    assert "parents[2]" in local
    assert '"autorl_tui" / "isolation" / "sandbox_bwrap.py"' in (root / "tests/test_old.py").read_text()
    assert '"autorl_tui.executors.gpus.WHAT"' in (root / "tests/test_old.py").read_text()
    assert (root / "docs/x.md").read_text() == \
        "The sandbox (`isolation/sandbox_bwrap.py`, `autorl_tui/executors/gpus.py`) and `engine/engine.py`.\n"
    layers = (root / "pyproject.toml").read_text()
    assert layers.index('"autorl_tui.tui"') < layers.index('"autorl_tui.daemon"') < layers.index('"autorl_tui.engine |')
    assert layers.index('"autorl_tui.grading_host"') < layers.index('"autorl_tui.isolation"') < \
        layers.index('"autorl_tui.grading"')

    tiny = (root / "autorl_tui/tasks/deepsearchqa/tiny_model.py").read_text()
    assert "from autorl_tui.tasks.deepsearchqa import tool_loop as E\nfrom .tool_loop import WHAT\n" in tiny
    assert 'FILES = ("tool_loop.py", "prompts.py")' in tiny            # the workspace copy's name too

    # the carved code imports and runs where it now lives
    check = subprocess.run(
        [sys.executable, "-c", "from autorl_tui.engine.engine import describe; from autorl_tui.engine import "
         "added_by_a_branch as a; print(describe(), a.ROOT)"],
        cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert check.stdout.split() == ["gpus", "scheduling", "base", "bwrap", "local", str(root)]

    again = subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.strip() == "carve_engine: 0 change(s)"


@pytest.mark.subprocess
def test_a_folder_that_is_no_checkout_is_refused_in_one_line(tmp_path):
    run = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True)
    assert run.returncode == 2
    assert run.stderr.strip() == f"carve_engine: {tmp_path} has no autorl_tui/ folder; pass the checkout's root"
    assert "Traceback" not in run.stderr
