"""A lab ships a task, its data provider and its scorer as an installed package (entry points in
its `.dist-info`), and the harness finds them through the same registry as its built-ins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = '''
from pathlib import Path
import json


def tasks_dir():
    return Path(__file__).parent / "tasks"


def materialize(card, split, out_dir):
    n = card.data["splits"][split]["n"]
    path = Path(out_dir) / f"{split}.jsonl"
    path.write_text("".join(json.dumps({"id": f"{split}-{i}", "prompt": f"say {split} {i}", "answer": str(i)}) + "\\n"
                            for i in range(n)))
    return path


class LabScorer:
    name = "lab_exact"
    version = "1"
    item_fields = ("id", "prompt", "answer")
'''

CARD = '''
id: lab-count
name: Counting (a lab's plugin task)
level: 1
scorer: lab_exact
primary_metric: accuracy
protocol: {temperature: 0.0, max_tokens: 8, prompt_format: chat}
data:
  provider: python
  function: lab_count
  splits: {train: {n: 6}, dev: {n: 3}, test: {n: 4}}
budget: 1m
version: "1"
'''


def install(site: Path, dist: str, entry_points: str) -> None:
    """What `pip install` leaves: the package and a .dist-info with METADATA and entry_points.txt."""
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


def run_with(site: Path, code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=120)


def make_lab_plugin(site: Path) -> None:
    pkg = site / "lab_tasks"
    (pkg / "tasks" / "lab-count").mkdir(parents=True)
    (pkg / "__init__.py").write_text(PLUGIN)
    (pkg / "tasks" / "lab-count" / "task.yaml").write_text(CARD)
    (pkg / "tasks" / "lab-count" / "description.md").write_text("Count.\n")
    install(site, "lab_tasks", """
        [autorl_tui.tasks]
        lab = lab_tasks:tasks_dir
        [autorl_tui.scorers]
        lab_exact = lab_tasks:LabScorer
        [autorl_tui.data_providers]
        lab_count = lab_tasks:materialize
    """)


@pytest.mark.subprocess
def test_an_installed_task_plugin_is_found_validated_and_materialized(tmp_path):
    site = tmp_path / "site"
    make_lab_plugin(site)
    out = run_with(site, f"""
        import json
        from pathlib import Path
        from autorl_tui import registry
        from autorl_tui.catalog.tasks import find_task, materialize, read_items, task_search_path
        from autorl_tui.catalog.task_checks import validate_card
        from autorl_tui.grading.scorers import get_scorer

        card = find_task("lab-count", task_search_path())
        report = validate_card(card.dir, cache_root=Path({str(tmp_path / 'cache')!r}))
        dev = read_items(materialize(card, "dev", Path({str(tmp_path / 'cache2')!r})))
        print(json.dumps({{"scorers": registry.names("scorers"), "card_dir": str(card.dir),
                          "problems": [str(p) for p in report.problems], "sizes": report.split_sizes,
                          "dev": [it["id"] for it in dev], "scorer": type(get_scorer("lab_exact")).__name__,
                          "arith": find_task("arith", task_search_path()).id}}))
    """)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert "lab_exact" in got["scorers"] and "exact_match" in got["scorers"]
    assert got["card_dir"] == str(site / "lab_tasks" / "tasks" / "lab-count")
    assert got["problems"] == []
    assert got["sizes"] == {"train": 6, "dev": 3, "test": 4}
    assert got["dev"] == ["dev-0", "dev-1", "dev-2"]
    assert got["scorer"] == "LabScorer"
    assert got["arith"] == "arith"            # built-in tasks come through the same path


@pytest.mark.subprocess
def test_without_the_plugin_its_task_and_scorer_are_unknown(tmp_path):
    out = run_with(tmp_path, """
        from autorl_tui import registry
        print("lab_exact" in registry.names("scorers"), "lab" in registry.names("tasks"))
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.subprocess
def test_a_plugin_may_not_take_a_builtin_name(tmp_path):
    site = tmp_path / "site"
    make_lab_plugin(site)
    install(site, "evil_scores", """
        [autorl_tui.scorers]
        exact_match = lab_tasks:LabScorer
    """)
    out = run_with(site, """
        from autorl_tui import registry
        try:
            registry.load("scorers", "exact_match")
        except registry.PluginError as exc:
            print("refused:", exc)
    """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused: evil_scores declares autorl_tui.scorers 'exact_match'")
    assert "rename the plugin's entry point" in out.stdout


def test_every_builtin_resolves_to_what_its_kind_expects():
    from autorl_tui import registry
    from autorl_tui.instrument.parsers import get_parser

    for name in registry.names("output_parsers"):
        assert get_parser(name).output_format == name
    for name in registry.names("scorers"):
        assert callable(getattr(registry.load("scorers", name)(), "evaluate"))
    for name in registry.names("commands"):
        assert callable(registry.load("commands", name))
    assert (registry.load("tasks", "builtin")() / "arith" / "task.yaml").exists()
