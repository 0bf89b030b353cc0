"""The import contracts of pyproject.toml ([tool.importlinter]) hold, and breaking one fails.

`lint-imports` runs on the real tree; then a forbidden import is planted *inside a function* of a
temporary copy of the package (the real tree is never touched), which must break the contracts:
function-level imports count, so a lazy import cannot hide an arrow or a cycle."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def lint_imports(tree: Path) -> subprocess.CompletedProcess:
    """`lint-imports` on the package and pyproject.toml found in `tree` (no cache: writes nothing)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", code, "--config", str(tree / "pyproject.toml"), "--no-cache",
                           "--no-logo"], cwd=tree, env=env, capture_output=True, text=True, timeout=300)


def copy_tree(dst: Path) -> Path:
    shutil.copytree(ROOT / "autorl_tui", dst / "autorl_tui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", dst / "pyproject.toml")
    return dst


def plant(tree: Path, module: str, statement: str) -> None:
    """Append a function whose body imports `statement` (never called)."""
    path = tree / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n\ndef _planted():\n    {statement}\n")


@pytest.mark.subprocess
def test_the_contracts_hold_on_the_real_tree():
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert " broken" in out.stdout and "0 broken" in out.stdout


@pytest.mark.subprocess
def test_a_planted_forbidden_import_inside_a_function_breaks_the_check(tmp_path):
    tree = copy_tree(tmp_path)
    baseline = lint_imports(tree)
    assert baseline.returncode == 0, baseline.stdout + baseline.stderr   # the copy alone is clean
    plant(tree, "autorl_tui.engine.scheduling", "from autorl_tui.tui import app  # noqa: F401")
    plant(tree, "autorl_tui.catalog.plans", "import autorl_tui.engine.engine  # noqa: F401")
    out = lint_imports(tree)
    assert out.returncode == 1, out.stdout + out.stderr
    report = out.stdout
    assert "autorl_tui.engine.scheduling -> autorl_tui.tui" in report
    assert "autorl_tui.catalog.plans -> autorl_tui.engine.engine" in report
    for contract in ("Only the console (tui/, and commands that open it) imports the TUI or Textual BROKEN",
                     "The catalog is data: it imports no engine, grader or task implementation BROKEN",
                     "No import cycles between sibling modules or packages, at any depth BROKEN"):
        assert contract in " ".join(report.split()), report
    assert (ROOT / "autorl_tui/engine/scheduling.py").read_text().count("_planted") == 0
