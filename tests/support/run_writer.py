"""Writes runs into a store the way the engine does, through the real `Store` API.

Until the engine lands, report tests and the report benchmark need stores with realistic rows:
a run with its spec, an attempt, state changes, agent stdout and parsed actions, training
metrics with TRL's key names, code revisions with blobs, submissions in every status (scored,
rejected, errored, timed out, duplicate), graded samples with failure kinds, a cached baseline
with its samples, and resource samples. Everything is deterministic for a given seed.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field

from autorl_tui.store.db import Store

T0 = 1_790_000_000.0  # a fixed epoch so reports are reproducible
BASELINE_TEST_OFFSET = -0.5  # the base model's test score relative to its dev score


@dataclass
class RunShape:
    run_id: str
    task: str = "arith"
    level: int = 1
    agent: str = "baseline-copy"
    model: str = "tiny"
    driver: str | None = None
    seed: int = 0
    plan: str | None = None
    budget_s: float = 1800.0
    duration_s: float = 1500.0
    start: float = T0
    baseline: float = 20.0
    # dev scores of scored submissions, in order; drops are interleaved by `drops`
    scores: list[float] = field(default_factory=lambda: [24.0, 31.0, 29.0])
    drops: list[str] = field(default_factory=lambda: ["rejected", "error", "timeout", "duplicate"])
    test_delta: float = -1.0          # test score = best dev + this
    n_stdout: int = 120                # extra agent stdout lines
    metric_steps: int = 60             # training steps logged (each step logs ~8 series)
    dangers: tuple[str, ...] = ()      # kl_spike, entropy_collapse, length_blowup, nan, reward_hacking
    n_samples: int = 40                # graded dev samples per scored submission
    state: str = "done"
    end_reason: str = "budget exhausted"
    pass_at_k: bool = False
    gpus: list[int] = field(default_factory=list)
    tokens: tuple[int, int] | None = (120_000, 18_000)


def spec_for(shape: RunShape) -> dict:
    protocol = {"temperature": 0.0, "top_p": 1.0, "n": 4 if shape.pass_at_k else 1, "max_tokens": 64,
                "max_steps": None, "prompt_format": "chat", "system_prompt": None, "batch_size": 64,
                "seed": 0, "stop": None, "k": [1, 4] if shape.pass_at_k else [1]}
    return {
        "task": {"id": shape.task, "name": shape.task.title(), "level": shape.level, "scorer": "exact_match",
                 "primary_metric": "accuracy", "protocol": protocol,
                 "data": {"provider": "generator", "generator": shape.task,
                          "splits": {"train": {"n": 4000}, "dev": {"n": 200}, "test": {"n": 300}}},
                 "version": "1"},
        "protocol": protocol,
        "agent": {"name": shape.agent, "output_format": "text"},
        "model": {"name": shape.model, "path": f"/models/{shape.model}"},
        "driver": shape.driver,
    }


TRAIN_V1 = """import json, os
from transformers import AutoModelForCausalLM

MODEL = os.environ["MODEL_PATH"]


def main():
    model = AutoModelForCausalLM.from_pretrained(MODEL)
    model.save_pretrained(os.environ["OUTPUT_DIR"] + "/ckpt")


if __name__ == "__main__":
    main()
"""


def _train_version(k: int) -> str:
    lines = TRAIN_V1.splitlines()
    lines.insert(3, f"LEARNING_RATE = {1e-5 * (k + 1):.0e}")
    lines.insert(4, f"EPOCHS = {k + 1}")
    if k >= 2:
        lines.insert(8, "    # GRPO with a format reward")
    return "\n".join(lines) + "\n"


def write_run(store: Store, shape: RunShape) -> dict:
    """Writes one run. Returns ids the tests need (submission ids by status, baseline id)."""
    rnd = random.Random(f"{shape.run_id}:{shape.seed}")
    t0 = shape.start
    t_end = t0 + shape.duration_s
    plan_id = None
    if shape.plan:
        existing = store.one("SELECT id FROM plans WHERE name = ?", (shape.plan,))
        plan_id = existing["id"] if existing else store.insert(
            "plans", {"id": f"p-{shape.plan}", "name": shape.plan, "source": f"name: {shape.plan}\n",
                      "created_at": t0 - 100})
    store.insert("runs", {
        "id": shape.run_id, "plan_id": plan_id, "plan_name": shape.plan, "task": shape.task,
        "level": shape.level, "agent": shape.agent, "model": shape.model, "driver": shape.driver,
        "seed": shape.seed, "budget_s": shape.budget_s, "executor": "local",
        "gpus_requested": len(shape.gpus), "state": "queued", "created_at": t0 - 60,
        "spec": spec_for(shape), "current_attempt": 1})
    store.insert("attempts", {"run_id": shape.run_id, "number": 1, "state": "exited", "executor": "local",
                              "started_at": t0, "ended_at": t_end, "pid": 4242, "gpus": shape.gpus,
                              "exit_code": 0, "log_dir": f"/runs/{shape.run_id}/attempt-1"})
    for i, state in enumerate(("preparing", "baseline", "running")):
        store.append_event(shape.run_id, "state", f"state -> {state}", data={"state": state},
                           attempt=1, ts=t0 - 30 + i * 15)

    # baseline (cached per task/model/protocol) and its samples
    base = store.one("SELECT id FROM baselines WHERE task = ? AND model = ? AND split = 'dev'",
                     (shape.task, shape.model))
    if base is None:
        base_id = store.insert("baselines", {"task": shape.task, "model": shape.model, "protocol_hash": "p1",
                                             "grader_version": "exact_match-1", "split": "dev",
                                             "score": shape.baseline, "metrics": {"accuracy": shape.baseline},
                                             "created_at": t0 - 20})
        store.insert_many("samples", [_sample(rnd, None, None, base_id, i, shape.baseline / 100)
                                      for i in range(shape.n_samples)])
    else:
        base_id = base["id"]

    # the agent's session: phases of exploring, editing, training, submitting
    n_subs = len(shape.scores) + len(shape.drops)
    sub_times = [t0 + shape.duration_s * (k + 1) / (n_subs + 1) for k in range(n_subs)]
    seg_start = t0
    rev_seq = 0
    revisions: list[int] = []

    def snapshot(ts: float, reason: str, k: int) -> int:
        nonlocal rev_seq
        rev_seq += 1
        files = {"train.py": _train_version(k).encode(),
                 "README.md": f"notes v{k}\n".encode(),
                 "reward.py": (f"def reward(x):\n    return {k} * float(x == 'ok')\n").encode()}
        manifest = {path: store.put_blob(content) for path, content in files.items()}
        rid = store.insert("revisions", {"run_id": shape.run_id, "seq": rev_seq, "ts": ts, "reason": reason,
                                         "manifest": manifest, "n_files": len(files),
                                         "total_bytes": sum(len(c) for c in files.values()),
                                         "skipped": ["model.safetensors"] if k else []})
        revisions.append(rid)
        return rid

    snapshot(t0 + 1, "change", 0)
    ids: dict = {"baseline_id": base_id, "submissions": {}, "revisions": revisions}
    score_iter = iter(shape.scores)
    drop_iter = iter(shape.drops)
    order = _interleave(len(shape.scores), len(shape.drops))
    step = 0
    steps_per_segment = max(1, shape.metric_steps // max(1, n_subs))
    best = None
    for k, (what, ts_sub) in enumerate(zip(order, sub_times)):
        span = ts_sub - seg_start
        # explore: read files
        t = seg_start + 2
        for cmd in ("ls -la", "cat description.md", "head data/train.jsonl"):
            store.append_event(shape.run_id, "action", cmd, data={"kind": "shell", "command": cmd}, attempt=1, ts=t)
            store.append_event(shape.run_id, "action", f"({len(cmd)} lines)", data={"kind": "tool_result"},
                               attempt=1, ts=t + 1)
            t += 0.05 * span
        store.append_event(shape.run_id, "action", "I will fine-tune with a higher learning rate",
                           data={"kind": "message"}, attempt=1, ts=t)
        # write code
        t = seg_start + 0.3 * span
        store.append_event(shape.run_id, "action", "edit code/train.py",
                           data={"kind": "file_edit", "path": "code/train.py"}, attempt=1, ts=t)
        snapshot(t + 3, "change", k + 1)
        # train: the command, then metrics and progress lines
        t_train = seg_start + 0.4 * span
        store.append_event(shape.run_id, "action", "python code/train.py",
                           data={"kind": "shell", "command": "python code/train.py"}, attempt=1, ts=t_train)
        train_span = 0.45 * span
        for j in range(steps_per_segment):
            step += 1
            ts = t_train + train_span * (j + 1) / (steps_per_segment + 1)
            _metrics(store, shape, step, ts, rnd)
        for j in range(shape.n_stdout // max(1, n_subs)):
            store.append_event(shape.run_id, "stdout", f"{j} it, loss {rnd.random():.3f}",
                               attempt=1, ts=t_train + train_span * j / max(1, shape.n_stdout // max(1, n_subs)))
        store.append_event(shape.run_id, "stderr", "UserWarning: padding side", level="warning", attempt=1,
                           ts=t_train + 1.5)
        # submit
        rev_id = snapshot(ts_sub, "submission", k + 1)
        store.append_event(shape.run_id, "action", "curl -X POST $GRADING_SERVER_URL/submit",
                           data={"kind": "shell", "command": "curl -X POST $GRADING_SERVER_URL/submit"},
                           attempt=1, ts=ts_sub - 0.5)
        store.append_event(shape.run_id, "submission", f"submission {k + 1} received", attempt=1, ts=ts_sub)
        row = {"run_id": shape.run_id, "attempt": 1, "seq": k + 1, "path": f"output/ckpt-{k + 1}",
               "snapshot_path": f"/snapshots/{shape.run_id}/{k + 1}", "content_hash": f"h{k}",
               "revision_id": rev_id, "received_at": ts_sub, "status": "received"}
        grading_s = 40.0
        if what == "score":
            score = next(score_iter)
            correct_frac = score / 100
            metrics = {"accuracy": score}
            if shape.pass_at_k:
                metrics = {"accuracy": score, "pass@1": score, "pass@4": min(100.0, score * 1.6)}
            row.update(status="scored", score=score, improvement=score - shape.baseline,
                       graded_at=ts_sub + grading_s, metrics=metrics, inference_s=30.0, grading_s=grading_s)
            sid = store.insert("submissions", row)
            store.insert_many("samples", [_sample(rnd, shape.run_id, sid, None, i, correct_frac)
                                          for i in range(shape.n_samples)])
            if best is None or score > best[1]:
                best = (sid, score, ts_sub)
            store.append_event(shape.run_id, "grading", f"submission {k + 1} scored {score:.1f}",
                               data={"submission": k + 1, "score": score}, attempt=1, ts=ts_sub + grading_s)
        else:
            kind = next(drop_iter)
            if kind == "duplicate":
                first = next(iter(ids["submissions"].values()), [None])[0]
                row.update(status="duplicate", duplicate_of=first, graded_at=ts_sub + 0.1,
                           error=None)
            elif kind == "timeout":
                row.update(status="error", error="grading timed out after 600 s", graded_at=ts_sub + 600)
            elif kind == "rejected":
                row.update(status="rejected", error="not a model folder: config.json missing",
                           graded_at=ts_sub + 0.2)
            else:
                row.update(status="error", error="invalid_model: weights have NaN", graded_at=ts_sub + 5)
            sid = store.insert("submissions", row)
            store.append_event(shape.run_id, "grading", f"submission {k + 1} {row['status']}",
                               level="warning", data={"submission": k + 1, "status": row["status"]},
                               attempt=1, ts=row["graded_at"])
            what = kind
        ids["submissions"].setdefault(what, []).append(sid)
        seg_start = ts_sub + grading_s
    # resources every 10 s
    for i in range(int(shape.duration_s // 10)):
        gpus = [{"index": g, "util": 50.0 + 10 * (i % 3), "mem_used": 1_000_000_000, "mem_total": 8_000_000_000}
                for g in shape.gpus]
        store.append_resource(shape.run_id, cpu_percent=100.0 + (i % 5) * 10, rss_bytes=500_000_000 + i * 1000,
                              n_procs=3, gpus=gpus or None, ts=t0 + i * 10,
                              load=[1.5 + (i % 4), 2.0 + (i % 2) * 0.5, 2.25])
    store.append_event(shape.run_id, "harness", "budget exhausted; stopping agent", attempt=1, ts=t_end)
    store.append_event(shape.run_id, "state", "state -> finalizing", data={"state": "finalizing"},
                       attempt=1, ts=t_end + 1)
    store.append_event(shape.run_id, "state", f"state -> {shape.state}", data={"state": shape.state},
                       attempt=1, ts=t_end + 60)
    store.flush()
    # Stores from before the dev/test baseline split have one baseline (dev); newer ones keep the
    # base model's test score in baseline_score and its dev score in baseline_dev_score.
    split = "baseline_dev_score" in {r["name"] for r in store.query("PRAGMA table_info(runs)")}
    base_test = shape.baseline + BASELINE_TEST_OFFSET if split else shape.baseline
    fields = {"state": shape.state, "end_reason": shape.end_reason, "started_at": t0,
              "deadline": t0 + shape.budget_s, "ended_at": t_end + 60, "baseline_score": base_test,
              "workspace": f"/ws/{shape.run_id}"}
    if split:
        fields["baseline_dev_score"] = shape.baseline
    if shape.state == "failed":
        fields["failure_source"] = "agent"
    if best is not None:
        test = max(0.0, best[1] + shape.test_delta)
        store.update("submissions", best[0], {"test_score": test})
        fields.update(best_dev_score=best[1], best_submission_id=best[0], test_score=test,
                      improvement=test - base_test)
        if split:
            fields["dev_improvement"] = best[1] - shape.baseline
    if shape.tokens:
        fields.update(tokens_in=shape.tokens[0], tokens_out=shape.tokens[1], cost_usd=round(
            shape.tokens[0] * 3e-6 + shape.tokens[1] * 15e-6, 4))
    store.update("runs", shape.run_id, fields)
    ids["best_submission_id"] = best[0] if best else None
    return ids


def _interleave(n_scores: int, n_drops: int) -> list[str]:
    order = []
    for i in range(max(n_scores, n_drops)):
        if i < n_scores:
            order.append("score")
        if i < n_drops:
            order.append("drop")
    return order


FAILURES = ("wrong_answer", "wrong_answer", "format_error", "truncated", "empty", "runtime_error", "timeout")


def _sample(rnd: random.Random, run_id, submission_id, baseline_id, i: int, p_correct: float) -> dict:
    correct = rnd.random() < p_correct
    expected = str(i * 7 % 23)
    kind = None if correct else FAILURES[i % len(FAILURES)]
    output = {None: f"The answer is {expected}", "wrong_answer": f"The answer is {int(expected) + 1}",
              "format_error": "I think it might be around there", "truncated": "Let me compute step by step " * 8,
              "empty": "", "runtime_error": "", "timeout": ""}[kind]
    return {"run_id": run_id, "submission_id": submission_id, "baseline_id": baseline_id, "split": "dev",
            "sample_id": f"dev-{i:04d}", "prompt": f"What is {i} * 7 mod 23? <b>show</b>",
            "output": output, "extracted": expected if correct else (None if kind != "wrong_answer" else str(int(expected) + 1)),
            "expected": expected, "correct": int(correct), "score": 1.0 if correct else 0.0,
            "tokens": len(output.split()) + 3, "failure_kind": kind,
            "error": {"runtime_error": "ZeroDivisionError: division by zero", "timeout": "generation exceeded 30 s"}.get(kind),
            "data": None}


def _metrics(store: Store, shape: RunShape, step: int, ts: float, rnd: random.Random) -> None:
    total = max(1, shape.metric_steps)
    x = step / total
    noise = lambda s: (rnd.random() - 0.5) * s  # noqa: E731
    kl = 0.02 + 0.01 * x + noise(0.004)
    if "kl_spike" in shape.dangers and abs(step - int(total * 0.7)) <= 1:
        kl = 2.5
    entropy = 1.2 - 0.3 * x + noise(0.02)
    if "entropy_collapse" in shape.dangers:
        entropy = 1.2 * (1 - x) ** 3 + 0.01
    length = 40 + 5 * x + noise(2)
    if "length_blowup" in shape.dangers:
        length = 40 + 200 * x ** 2
    reward = 0.2 + 0.5 * x + noise(0.05)
    loss = 1.0 / (1 + 3 * x) + noise(0.02)
    values = {"loss": loss, "reward": reward, "reward_std": 0.2 + noise(0.02), "kl": kl, "entropy": entropy,
              "completions/mean_length": length, "learning_rate": 1e-5 * (1 - x), "grad_norm": 1.0 + noise(0.2)}
    if "nan" in shape.dangers and step == int(total * 0.5):
        values["loss"] = math.nan
    for name, value in values.items():
        store.append_metric(shape.run_id, name, value, step=step, source="metrics_jsonl", phase="train",
                            attempt=1, ts=ts)


def write_bulk_run(store: Store, run_id: str, *, n_events: int, n_metric_points: int) -> None:
    """A long run for scale tests: the normal shape plus bulk stdout lines, actions and metric points."""
    shape = RunShape(run_id=run_id, duration_s=36_000, budget_s=36_000, metric_steps=0, n_stdout=0,
                     scores=[22.0 + i for i in range(20)], drops=["rejected", "error", "timeout", "duplicate"] * 2)
    write_run(store, shape)
    rnd = random.Random(run_id)
    have = store.one("SELECT count(*) n FROM events WHERE run_id = ?", (run_id,))["n"]
    kinds = ("stdout", "stdout", "stdout", "action", "stderr")
    for i in range(max(0, n_events - have)):
        ts = shape.start + shape.duration_s * i / n_events
        kind = kinds[i % len(kinds)]
        if kind == "action":
            sub = ("shell", "file_edit", "message", "tool_result")[i // 5 % 4]
            store.append_event(run_id, "action", f"{sub} #{i}", data={"kind": sub, "command": f"echo {i}"},
                               attempt=1, ts=ts)
        else:
            store.append_event(run_id, kind, f"line {i}: {'x' * rnd.randint(10, 80)}", attempt=1, ts=ts)
    names = ("loss", "reward", "kl", "entropy", "completions/mean_length")
    per_series = n_metric_points // len(names)
    for step in range(per_series):
        ts = shape.start + shape.duration_s * step / per_series
        for name in names:
            store.append_metric(run_id, name, math.sin(step / 500) + rnd.random() * 0.1, step=step,
                                source="metrics_jsonl", phase="train", attempt=1, ts=ts)
    store.flush()


def dumps(obj) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)


MATRIX_TASKS = (("arith", 1), ("gsm8k", 1), ("humaneval", 1), ("alfworld", 3))


def write_matrix(store: Store, plan: str = "demo", seeds: tuple[int, ...] = (0, 1, 2)) -> list[str]:
    """A plan's worth of small runs: two agents (one with two driver LLMs) × four tasks × seeds.
    `scripted` improves clearly on every task; `claude-code` improves on arith and regresses on
    alfworld; one run fails without a result."""
    ids = []
    n = 0
    for agent, drivers in (("scripted", (None,)), ("claude-code", ("sonnet", "opus"))):
        for task, level in MATRIX_TASKS:
            for driver in drivers:
                for seed in seeds:
                    n += 1
                    rid = f"r{n:04d}-{task}-{agent}-s{seed}" + (f"-{driver}" if driver else "")
                    base = {"arith": 20.0, "gsm8k": 35.0, "humaneval": 40.0, "alfworld": 10.0}[task]
                    if agent == "scripted":
                        gain = 8.0 + seed
                    else:
                        gain = {"arith": 12.0 + 2 * seed, "gsm8k": 1.0 - seed, "humaneval": 0.5 * seed,
                                "alfworld": -6.0 - seed}[task] + (2.0 if driver == "opus" else 0.0)
                    failed = agent == "claude-code" and task == "gsm8k" and seed == 2 and driver == "opus"
                    shape = RunShape(run_id=rid, task=task, level=level, agent=agent, driver=driver, seed=seed,
                                     plan=plan, start=T0 + n * 4000, duration_s=600, budget_s=900,
                                     baseline=base, scores=[] if failed else [base + gain - 1, base + gain + 1],
                                     drops=["rejected"] if seed == 1 else [], test_delta=-1.0, n_stdout=20,
                                     metric_steps=20, n_samples=12, pass_at_k=task == "humaneval",
                                     state="failed" if failed else "done",
                                     end_reason="agent exited with code 1" if failed else "agent finished",
                                     tokens=None if agent == "scripted" else (50_000, 5_000))
                    write_run(store, shape)
                    ids.append(rid)
    return ids
