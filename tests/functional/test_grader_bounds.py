"""The grader bounded (issue 24, item 5): the real worker, as the engine starts it, on the real
tiny model whose tokenizer carries a hostile chat template."""

import asyncio
import json
import os
import shutil
import time

import psutil
import pytest

from autorl_tui.catalog.tasks import find_task, materialize, task_search_path
from autorl_tui.engine.grader_service import group_running
from autorl_tui.engine.grading_client import run_grader

pytestmark = pytest.mark.slow

LOOP = ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
        "{{ messages[0]['content'] }}")
RECURSE = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"


def with_template(tiny_model_dir, dst, template: str):
    shutil.copytree(tiny_model_dir, dst)
    jinja = dst / "chat_template.jinja"
    if jinja.exists():
        jinja.write_text(template)
    config = json.loads((dst / "tokenizer_config.json").read_text())
    if "chat_template" in config or not jinja.exists():
        config["chat_template"] = template
        (dst / "tokenizer_config.json").write_text(json.dumps(config))
    return dst


def request(tmp_path, model, **extra):
    card = find_task("arith", task_search_path())
    split = materialize(card, "dev", tmp_path / "cache")
    return {"task": card.to_dict(), "split": "dev", "split_path": str(split), "model_path": str(model),
            "protocol": card.protocol.to_dict(), "scorer": card.scorer, "scorer_options": {},
            "backend": "transformers", "device": "cpu", "threads": 1, "seed": 0,
            "scratch_dir": str(tmp_path / "scratch"), "limit": 5, **extra}


def group_alive(pgid: int) -> bool:
    """A member of the group still runs (a zombie that the host's init has not reaped yet runs nothing)."""
    return group_running(pgid)


@pytest.mark.parametrize("template,message", [(LOOP, "ran past its time limit"), (RECURSE, "failed to render")])
def test_a_hostile_chat_template_fails_the_grading_within_its_limit(tmp_path, tiny_model_dir, template, message):
    model = with_template(tiny_model_dir, tmp_path / "model", template)
    limits = {"per_prompt_s": 2, "total_s": 10}
    outcome = asyncio.run(run_grader(request(tmp_path, model, template_limits=limits), tmp_path / "work",
                                     timeout_s=600))
    assert not outcome.ok and outcome.error_kind == "invalid_model", outcome
    assert "chat template" in outcome.error and message in outcome.error
    assert "tokenizer_config.json" in outcome.error          # says what to fix
    # Ended by the template limit, not the process timeout (600s): loading takes the rest.
    assert outcome.wall_s < 300


def test_a_hung_grader_is_killed_at_its_timeout_with_its_group_and_the_next_grading_succeeds(tmp_path, tiny_model_dir):
    model = with_template(tiny_model_dir, tmp_path / "model", LOOP)
    no_limits = {"per_prompt_s": None, "total_s": None}      # only the process timeout is left to stop it
    started, heard = [], []
    # Idle warm servers of earlier tests in this process (other grading folders) are not this one.
    earlier = {p.pid for p in psutil.Process().children()}

    async def hang():
        task = asyncio.create_task(run_grader(request(tmp_path, model, template_limits=no_limits),
                                              tmp_path / "hung", timeout_s=20,
                                              on_progress=lambda *progress: heard.append(progress)))
        # The worker (or the warm grader's server) leads its own process group; remember it to
        # check nothing of it survives.
        while not started and not task.done():
            for p in psutil.Process().children():
                try:
                    if p.pid not in earlier and any(m in " ".join(p.cmdline())
                                                    for m in ("autorl_tui.grading.worker", "grading.warm_server")):
                        started.append(p.pid)
                except psutil.Error:
                    pass
            await asyncio.sleep(0.05)
        return await task

    t0 = time.time()
    outcome = asyncio.run(hang())
    assert not outcome.ok and outcome.error_kind == "timeout", outcome
    assert "timed out after 20s" in outcome.error
    assert 20 <= time.time() - t0 < 80
    assert not group_alive(started[0])
    assert heard == [(0, 5, "inference")], heard           # loaded, then hung rendering its prompts
    good = asyncio.run(run_grader(request(tmp_path, tiny_model_dir), tmp_path / "good", timeout_s=600))
    assert good.ok and good.score is not None, good
