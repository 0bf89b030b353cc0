import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autorl_tui.catalog.plans import parse_plan
from autorl_tui.durations import parse_duration
from autorl_tui.exitcodes import InfraError, UsageError
from autorl_tui.home import EngineLock, Home, resolve_home


def test_home_resolution_order(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTORL_HOME", str(tmp_path / "env"))
    assert resolve_home(str(tmp_path / "cli")) == tmp_path / "cli"
    assert resolve_home(None) == tmp_path / "env"
    monkeypatch.delenv("AUTORL_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert resolve_home(None) == tmp_path / "xdg" / "autorl-tui"


@pytest.mark.subprocess
def test_lock_names_the_holder_pid(tmp_path):
    home = Home.open(str(tmp_path / "h"))
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(os.getcwd())!r})
        from autorl_tui.home import Home, EngineLock
        EngineLock(Home.open({str(home.root)!r})).acquire()
        print("locked", flush=True)
        time.sleep(30)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(InfraError, match=f"pid {holder.pid}"):
            EngineLock(home).acquire()
    finally:
        holder.kill()
        holder.wait()
    lock = EngineLock(home)
    lock.acquire()   # free again once the holder is gone
    lock.release()


def test_private_parts_of_home_are_not_world_readable(tmp_path):
    home = Home.open(str(tmp_path / "h"))
    for d in (home.cache, home.snapshots, home.runs_dir):
        assert oct(d.stat().st_mode & 0o777) == "0o700"


@pytest.mark.parametrize("text,seconds", [("120s", 120), ("10m", 600), ("1h30m", 5400), (45, 45), ("2.5m", 150)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "ten minutes", "-5s", 0, True])
def test_bad_durations_say_how_to_write_one(bad):
    with pytest.raises(UsageError):
        parse_duration(bad)


def test_plan_expands_the_matrix():
    plan = parse_plan("name: m\ntasks: [a, b]\nagents: [x]\nmodels: [tiny]\nseeds: [0, 1, 2]\nbudget: 1m\n")
    assert len(plan.runs) == 6
    assert {(r.task, r.seed) for r in plan.runs} == {(t, s) for t in "ab" for s in (0, 1, 2)}
    assert all(r.budget_s == 60 for r in plan.runs)


def test_plan_log_cap_reaches_the_run_options():
    plan = parse_plan("tasks: [a]\nagents: [x]\nbudget: 1m\nlog_cap: {events: 500, bytes: 100000}\n")
    assert plan.runs[0].options["log_cap"] == {"events": 500, "bytes": 100000}


def test_card_size_factor_must_be_positive(tmp_path):
    from autorl_tui.catalog.tasks import load_task_card

    card = tmp_path / "t" / "task.yaml"
    card.parent.mkdir()
    body = ("id: t\nlevel: 1\nscorer: exact_match\nprimary_metric: accuracy\nprotocol: {}\n"
            "data: {provider: files, splits: {}}\n")
    card.write_text(body + "submission_cap: {size_factor: -1}\n")
    with pytest.raises(UsageError, match="size_factor must be a positive number"):
        load_task_card(card)
    card.write_text(body + "submission_cap: {size_factor: 2.5}\n")
    assert load_task_card(card).submission_cap["size_factor"] == 2.5


@pytest.mark.parametrize("text,msg", [
    ("tasks: [a]\nagents: [x]\n", "budget"),
    ("tasks: [a]\nagents: [x]\nbudget: 1m\nexecutor: slurm\n", "executor"),
    ("tasks: [a]\nagents: [x]\nbudget: 1m\nseeds: [a]\n", "seeds"),
    ("tasks: [a]\nagents: [x]\nbudget: 1m\nbugdet: 2m\n", "unknown key"),
    ("- just a list\n", "mapping"),
    ("tasks: [a\n", "not valid YAML"),
    ("tasks: [a]\nagents: [x]\nbudget: 1m\nlog_cap: 5\n", "log_cap must be a mapping"),
    ("tasks: [a]\nagents: [x]\nbudget: 1m\nlog_cap: {lines: 5}\n", "log_cap must be a mapping"),
    ("tasks: [a]\nagents: [x]\nbudget: 1m\nlog_cap: {events: 0}\n", "log_cap.events must be a positive"),
    ("tasks: [a]\nagents: [x]\nbudget: 1m\nexecutor: ray\ncluster: {containers: yes-please}\n",
     "cluster.containers must be true or false"),
    ("tasks: [a]\nagents: [x]\nbudget: 1m\nexecutor: docker\ncluster: {containers: true}\n",
     "`cluster` applies to executor ray only"),
])
def test_bad_plans_are_explained(text, msg):
    with pytest.raises(UsageError, match=msg):
        parse_plan(text)


def test_a_ray_plan_with_an_image_asks_for_containers_on_the_nodes():
    plan = parse_plan("tasks: [a]\nagents: [x]\nbudget: 1m\nexecutor: ray\nimage: autorl-agent:latest\n"
                      "cluster: {address: 'h:1'}\n")
    assert plan.runs[0].options["cluster"] == {"address": "h:1", "containers": True}
    assert plan.runs[0].options["image"] == "autorl-agent:latest"
    plain = parse_plan("tasks: [a]\nagents: [x]\nbudget: 1m\nexecutor: ray\n")
    assert "containers" not in (plain.runs[0].options.get("cluster") or {})


def test_commands_without_home_never_reach_the_users_home_in_tests():
    """conftest points $AUTORL_HOME and $XDG_DATA_HOME at a temporary folder for the session, so a
    command run without --home (like `tasks validate PATH`) writes there, not into ~/.local/share."""
    import tempfile

    from autorl_tui.home import default_home

    for path in (resolve_home(None), default_home()):
        assert path.resolve().is_relative_to(Path(tempfile.gettempdir()).resolve()), path


def test_plans_refuse_duplicates_and_absurd_budgets_and_pair_tasks_with_models():
    import pytest as _pytest

    from autorl_tui.catalog.plans import parse_plan
    from autorl_tui.exitcodes import UsageError

    base = "name: p\nagents: [a, b]\nseeds: [0, 1]\nbudget: 1h\n"
    for text, phrase in ((base + "tasks: [arith, arith]\n", "`tasks` lists arith more than once"),
                         (base.replace("[0, 1]", "[0, 0]") + "tasks: [arith]\n", "`seeds` lists 0 more than once"),
                         (base.replace("[a, b]", "[a, a]") + "tasks: [arith]\n", "`agents` lists a"),
                         (base.replace("1h", "100000h") + "tasks: [arith]\n", "longer than the 7 days"),
                         (base + "tasks: [arith]\ncells: [{task: arith, model: tiny}]\n", "drop `tasks`"),
                         (base + "cells: [{task: arith}]\n", "exactly `task` and `model`"),
                         (base + "cells: [{task: x, model: m}, {task: x, model: m}]\n", "x/m more than once")):
        with _pytest.raises(UsageError) as err:
            parse_plan(text)
        assert phrase in str(err.value), (text, str(err.value))
    plan = parse_plan(base + "cells: [{task: webshop, model: tiny-webshop}, {task: arith, model: tiny}]\n")
    assert [(r.task, r.model, r.agent, r.seed) for r in plan.runs][:3] == [
        ("webshop", "tiny-webshop", "a", 0), ("webshop", "tiny-webshop", "a", 1), ("webshop", "tiny-webshop", "b", 0)]
    assert {(r.task, r.model) for r in plan.runs} == {("webshop", "tiny-webshop"), ("arith", "tiny")}
    assert len(plan.runs) == 8
    # the matrix form keeps its order: task, agent, model, seed
    plan = parse_plan(base + "tasks: [t1, t2]\nmodels: [m1, m2]\n")
    assert [(r.task, r.agent, r.model) for r in plan.runs][:4] == [("t1", "a", "m1"), ("t1", "a", "m1"),
                                                                    ("t1", "a", "m2"), ("t1", "a", "m2")]


def test_a_built_in_model_made_for_another_task_is_refused_unless_the_plan_allows_it(tmp_path):
    import asyncio

    import pytest as _pytest

    from autorl_tui.catalog.plans import parse_plan
    from autorl_tui.engine.engine import Engine
    from autorl_tui.exitcodes import UsageError
    from autorl_tui.home import Home

    plan = "name: p\ntasks: [webshop-mini]\nagents: [baseline-copy]\nmodels: [tiny]\nbudget: 1m\nisolation: none\n"

    async def enqueue(text):
        engine = Engine(Home.open(str(tmp_path / "h")))
        await engine.start()
        engine.queue_paused = True
        try:
            return await engine.enqueue_plan(parse_plan(text))
        finally:
            await engine.stop()

    with _pytest.raises(UsageError) as err:
        asyncio.run(enqueue(plan))
    assert "task webshop-mini is made for model tiny-webshop" in str(err.value)
    assert "cells: [{task: webshop-mini, model: tiny-webshop}]" in str(err.value) and "model_mismatch: allow" in str(err.value)
    assert len(asyncio.run(enqueue(plan + "model_mismatch: allow\n"))) == 1
    with _pytest.raises(UsageError, match="model_mismatch must be refuse"):
        parse_plan(plan + "model_mismatch: yes-please\n")
