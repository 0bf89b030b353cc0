"""Training metrics grouped into sessions and stored once: the stdout log-dict parser, the session
rules, deduplication across stdout / trainer_state.json / TensorBoard / METRICS_FILE, the fidelity
upgrade, exactly-once resume through the real store, and bad files from the agent."""

import json
import os
import threading

import pytest

from autorl_tui.instrument.metrics import MetricsCollector
from autorl_tui.instrument.sessions import SessionTracker, canonical, kind_of
from autorl_tui.instrument.trainer_log import parse_log_dict
from autorl_tui.store.db import Store, decode_row

# What transformers 5.23 / TRL 1.16 print with `trl sft ... --logging_steps 2` (captured here).
SFT_LINES = [
    "{'loss': '4.48', 'grad_norm': '9.284', 'learning_rate': '1.833e-05', 'entropy': '0.9541', "
    "'mean_token_accuracy': '0.4444', 'num_tokens': '188', 'epoch': '0.04'}",
    "{'loss': '4.514', 'grad_norm': '11.28', 'learning_rate': '1.5e-05', 'entropy': '1.033', "
    "'mean_token_accuracy': '0.442', 'num_tokens': '377', 'epoch': '0.08'}",
    "{'loss': '4.464', 'grad_norm': '9.372', 'learning_rate': '1.167e-05', 'entropy': '1.061', "
    "'mean_token_accuracy': '0.5001', 'num_tokens': '567', 'epoch': '0.12'}",
    "{'train_runtime': '1.834', 'train_samples_per_second': '26.17', 'train_steps_per_second': '6.543', "
    "'train_loss': '4.391', 'epoch': '0.12'}",
]
EXACT = [  # the same log records as trainer_state.json holds them (full precision, with steps)
    {"entropy": 0.9541129171848297, "epoch": 0.04, "grad_norm": 9.28418254852295, "learning_rate": 1.8333333333333333e-05,
     "loss": 4.479835510253906, "mean_token_accuracy": 0.4444444477558136, "num_tokens": 188.0, "step": 2},
    {"entropy": 1.0334843397140503, "epoch": 0.08, "grad_norm": 11.280084609985352, "learning_rate": 1.5e-05,
     "loss": 4.513652801513672, "mean_token_accuracy": 0.44200244545936584, "num_tokens": 377.0, "step": 4},
    {"entropy": 1.061, "epoch": 0.12, "grad_norm": 9.372, "learning_rate": 1.167e-05, "loss": 4.4641,
     "mean_token_accuracy": 0.5001, "num_tokens": 567.0, "step": 6},
    {"train_runtime": 1.834, "train_samples_per_second": 26.17, "train_steps_per_second": 6.543,
     "train_loss": 4.391, "epoch": 0.12, "step": 6},
]
N_VALUES = 6 * 3 + 4      # numeric values per record, epoch left out


def test_log_dict_lines_parse_and_nothing_else_does():
    values = parse_log_dict(SFT_LINES[0])
    assert values["loss"] == 4.48 and values["epoch"] == 0.04 and values["num_tokens"] == 188
    assert parse_log_dict("{'loss': 0.5, 'learning_rate': 1e-05, 'epoch': 1.0}") == {
        "loss": 0.5, "learning_rate": 1e-05, "epoch": 1.0}                      # transformers 4.x: numbers
    for line in ("{'a': 1, 'epoch': 2}",                                      # no trainer key
                 "{'loss': 1.0}",                                             # no epoch
                 "step 3: {'loss': '1.0', 'epoch': '0.1'} done",              # words after the dict
                 '{"type": "assistant", "loss": 1, "epoch": 1}',              # a stream-JSON event
                 "{'loss': {'a': 1}, 'epoch': 1}",                            # nested value
                 "{'loss': '1.0', 'epoch': 0.1, 3: 4}",                       # non-string key
                 "{'loss': 'high', 'note': [1], 'epoch': '1'}",
                 "{'loss': __import__('os').getpid(), 'epoch': 1}",           # never evaluated
                 "{'loss': '1.0', 'epoch': '0.1'" + ", 'x': 1" * 3000 + "}"):  # absurdly long
        assert parse_log_dict(line) is None, line


def test_canonical_names_and_kinds():
    assert canonical("train/loss") == "loss" and canonical("eval/loss") == "eval_loss" and canonical("kl") == "kl"
    assert kind_of(["loss", "mean_token_accuracy", "num_tokens"]) == "sft"
    assert kind_of(["reward", "reward_std", "kl", "completions/mean_length"]) == "grpo"
    assert kind_of(["rewards/chosen", "loss"]) == "dpo"
    assert kind_of(["loss"], hint="logs/grpo_trainer/checkpoint-1/trainer_state.json") == "grpo"
    assert kind_of(["loss"]) == "unknown"


def _collector(tmp_path, offsets=None, store=None):
    ws = tmp_path / "ws"
    for d in ("logs", "output", "code"):
        (ws / d).mkdir(parents=True, exist_ok=True)
    if store is None:
        return MetricsCollector(ws, offsets)
    tracker = SessionTracker(lambda row: store.append_session("r1", attempt=1, **row),
                             lambda sid, fields: store.stage_update("training_sessions", {"id": sid}, fields))
    if offsets:
        tracker.restore([decode_row("training_sessions", r) for r in store.query("SELECT * FROM training_sessions")],
                        store.query("SELECT * FROM metrics WHERE session_id IS NOT NULL ORDER BY id"))
    return MetricsCollector(ws, offsets, tracker)


def _write_state(path, entries):
    path.mkdir(parents=True, exist_ok=True)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": 1, "log_history": entries}))


def _pump(store, c, final=True):
    pts, notes = c.poll(final=final)
    for p in pts:
        c.tracker.stored(p.key, store.append_metric("r1", p.name, p.value, step=p.step, source=p.source,
                                                    attempt=1, ts=p.ts, session_id=p.session))
    for up in c.take_upgrades():
        store.stage_update("metrics", {"id": up.row_id}, up.fields)
    store.stage_update("attempts", {"run_id": "r1", "number": 1}, {"offsets": {"metrics": c.offsets()}})
    store.flush()
    return pts, notes


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "store.db")
    s.insert("attempts", {"run_id": "r1", "number": 1, "state": "running", "executor": "local"})
    yield s
    s.close()


def test_stdout_then_every_checkpoint_is_one_series_with_exact_values(tmp_path, store):
    c = _collector(tmp_path, store=store)
    c.feed_stdout(SFT_LINES[:2] + ["not a metric", "{'a': 1}"])
    pts, _ = _pump(store, c)
    assert len(pts) == 2 * 6 and {p.source for p in pts} == {"stdout"} and all(p.step is None for p in pts)
    out = c.workspace / "output"
    _write_state(out / "checkpoint-2", EXACT[:1])
    _write_state(out / "checkpoint-4", EXACT[:2])
    _pump(store, c)
    c.feed_stdout(SFT_LINES[2:])
    _pump(store, c)
    _write_state(out / "checkpoint-6", EXACT)
    _pump(store, c)
    rows = store.query("SELECT * FROM metrics ORDER BY id")
    assert len(rows) == N_VALUES                          # 3 checkpoints re-listing history: still once each
    loss = [r for r in rows if r["name"] == "loss"]
    # trainer_state.json is the better source: full precision and steps replace the printed values
    assert [(r["value"], r["step"], r["source"]) for r in loss] == [
        (4.479835510253906, 2, "trainer_state"), (4.513652801513672, 4, "trainer_state"), (4.4641, 6, "trainer_state")]
    sessions = [decode_row("training_sessions", r) for r in store.query("SELECT * FROM training_sessions")]
    assert len(sessions) == 1 and sessions[0]["kind"] == "sft" and sessions[0]["ended_at"] is not None
    assert sessions[0]["sources"][0] == "stdout" and len(sessions[0]["sources"]) == 4
    assert {r["session_id"] for r in rows} == {sessions[0]["id"]}


def test_a_second_run_into_the_same_folder_is_a_second_session(tmp_path, store):
    c = _collector(tmp_path, store=store)
    out = c.workspace / "output" / "checkpoint-6"
    c.feed_stdout(SFT_LINES)
    _write_state(out, EXACT)
    _pump(store, c)
    second = [dict(e, loss=e["loss"] - 1.0) if "loss" in e else e for e in EXACT]
    c.feed_stdout([line.replace("'loss': '4.", "'loss': '3.") for line in SFT_LINES])
    _write_state(out, second)                           # the second `trl sft` overwrote the checkpoint
    _pump(store, c)
    sessions = store.query("SELECT id, seq, kind FROM training_sessions ORDER BY seq")
    assert [(s["seq"], s["kind"]) for s in sessions] == [(1, "sft"), (2, "sft")]
    per = {s["id"]: [r["value"] for r in store.query(
        "SELECT value FROM metrics WHERE session_id=? AND name='loss' ORDER BY id", (s["id"],))] for s in sessions}
    first, again = per[sessions[0]["id"]], per[sessions[1]["id"]]
    assert first == [4.479835510253906, 4.513652801513672, 4.4641]
    assert again == pytest.approx([3.479835510253906, 3.513652801513672, 3.4641])
    assert store.one("SELECT count(*) AS n FROM metrics")["n"] == 2 * N_VALUES


def test_epoch_going_back_without_a_summary_starts_a_session(tmp_path):
    c = _collector(tmp_path)
    c.feed_stdout(SFT_LINES[:3] + SFT_LINES[:1])     # the first trainer died; a new one prints epoch 0.04
    pts, _ = c.poll()
    assert sorted({p.session for p in pts}) == [1, 2]


def test_tensorboard_and_stdout_give_one_point_each(tmp_path, store):
    from torch.utils.tensorboard import SummaryWriter

    c = _collector(tmp_path, store=store)
    c.feed_stdout(SFT_LINES[:3])
    _pump(store, c, final=False)
    writer = SummaryWriter(str(c.workspace / "output" / "runs" / "x"))
    for entry in EXACT[:3]:     # what transformers' TensorBoardCallback writes: train/<name> per step
        for k, v in entry.items():
            if k not in ("step", "epoch"):
                writer.add_scalar(f"train/{k}", v, entry["step"])
    writer.close()
    _pump(store, c)
    rows = store.query("SELECT name, step, value, source FROM metrics ORDER BY id")
    assert len(rows) == 3 * 6 and {r["name"] for r in rows} == {"loss", "grad_norm", "learning_rate", "entropy",
                                                                 "mean_token_accuracy", "num_tokens"}
    assert {r["source"] for r in rows} == {"tensorboard"} and [r["step"] for r in rows if r["name"] == "loss"] == [2, 4, 6]
    assert store.one("SELECT count(*) AS n FROM training_sessions")["n"] == 1


def test_resume_from_committed_offsets_stores_nothing_twice(tmp_path, store):
    c = _collector(tmp_path, store=store)
    c.feed_stdout(SFT_LINES[:2])
    _pump(store, c)
    offsets = store.get("attempts", 1)["offsets"]["metrics"]
    # the engine restarts: a new collector from the committed offsets and the store's rows
    again = _collector(tmp_path, offsets=offsets, store=store)
    _write_state(again.workspace / "output" / "checkpoint-4", EXACT[:2])
    again.feed_stdout(SFT_LINES[2:3])
    _pump(store, again)
    assert store.one("SELECT count(*) AS n FROM metrics")["n"] == 3 * 6
    assert store.one("SELECT count(*) AS n FROM training_sessions")["n"] == 1
    assert store.one("SELECT count(*) AS n FROM metrics WHERE source='trainer_state'")["n"] == 2 * 6


def test_metrics_file_segments_are_sessions_and_match_stdout(tmp_path):
    c = _collector(tmp_path)
    with open(c.workspace / "logs" / "metrics.jsonl", "w") as fh:
        for i, e in enumerate(EXACT[:3]):
            fh.write(json.dumps({"step": e["step"], "phase": "sft", "metrics": e}) + "\n")
        fh.write(json.dumps({"step": 1, "phase": "grpo", "metrics": {"reward": 0.1, "kl": 0.0, "loss": 0.0}}) + "\n")
    c.feed_stdout(SFT_LINES[:3])
    pts, _ = c.poll(final=True)
    kinds = {s.id: s.kind for s in c.tracker.sessions.values()}
    assert sorted(kinds.values()) == ["grpo", "sft"]
    assert len([p for p in pts if p.name == "loss"]) == 4      # 3 SFT (stdout ≡ file) + 1 GRPO


def test_a_fifo_metrics_file_and_a_dev_zero_trainer_state_are_agent_errors(tmp_path):
    c = _collector(tmp_path)
    os.mkfifo(c.workspace / "logs" / "metrics.jsonl")
    (c.workspace / "output" / "ckpt").mkdir()
    os.symlink("/dev/zero", c.workspace / "output" / "ckpt" / "trainer_state.json")
    (c.workspace / "output" / "tb").mkdir()
    os.symlink("/dev/zero", c.workspace / "output" / "tb" / "events.out.tfevents.1")
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("r", c.poll(final=True)), daemon=True)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive(), "reading the agent's files blocked"
    pts, notes = result["r"]
    assert pts == []
    bad = {n.path: n for n in notes if n.agent_error}
    assert set(bad) == {"logs/metrics.jsonl", "output/ckpt/trainer_state.json", "output/tb/events.out.tfevents.1"}
    assert "FIFO" in bad["logs/metrics.jsonl"].message or "regular" in bad["logs/metrics.jsonl"].message
    assert c.poll(final=True)[1] == []                 # reported once, not on every poll


# What `trl sft ... 2>&1 | tee` gives: tqdm's `\r` redraws (stderr) and the dict `tqdm.write` prints
# (stdout) on one line, with the cursor-up sequence tqdm uses for nested bars.
BAR = "\r{p:3d}%|##        | {i}/12 [00:0{i}<00:10,  1.10it/s]"


def _merged(i: int, line: str) -> str:
    return "".join(BAR.format(p=8 * k, i=k) for k in range(i + 1)) + "\x1b[A\x1b[2K" + line


def test_log_dicts_survive_merged_streams_after_the_last_carriage_return_and_ansi():
    for i, line in enumerate(SFT_LINES):
        assert parse_log_dict(_merged(i, line)) == parse_log_dict(line) is not None
    assert parse_log_dict("Step 3 done: " + SFT_LINES[0]) == parse_log_dict(SFT_LINES[0])   # words before it
    assert parse_log_dict(SFT_LINES[0] + "\r  8%|#   | 1/12") is None     # the dict was redrawn over
    assert parse_log_dict("\x1b[32m" + SFT_LINES[0] + "\x1b[0m") == parse_log_dict(SFT_LINES[0])


def test_a_dict_after_more_than_a_line_cap_of_progress_redraws_is_still_read(tmp_path):
    from autorl_tui.instrument.filetail import FileTail

    f = tmp_path / "stdout.log"
    redraws = "".join(BAR.format(p=k % 100, i=k % 10) for k in range(2000))      # ~100 KB without a newline
    f.write_text(redraws)
    tail = FileTail(f)
    split = tail.read_lines()          # a partial line over the cap is cut, before a `\r`
    assert split and all(part.startswith("\r") for part in split) and sum(map(len, split)) < len(redraws)
    with f.open("a") as out:
        out.write("\r 99%|######### | 9/10" + SFT_LINES[0] + "\n")
    lines = tail.read_lines()
    assert parse_log_dict(lines[-1]) == parse_log_dict(SFT_LINES[0])


def test_a_lone_summary_closes_the_session_it_belongs_to_and_opens_none(tmp_path, store):
    c = _collector(tmp_path, store=store)
    _write_state(c.workspace / "output" / "checkpoint-6", EXACT[:3])     # the log dicts came only from a file
    c.feed_stdout([_merged(3, SFT_LINES[3])])
    _pump(store, c)
    sessions = [decode_row("training_sessions", r) for r in store.query("SELECT * FROM training_sessions")]
    assert len(sessions) == 1 and sessions[0]["kind"] == "sft" and sessions[0]["ended_at"] is not None
    rows = store.query("SELECT name, session_id FROM metrics")
    assert len(rows) == N_VALUES and {r["session_id"] for r in rows} == {sessions[0]["id"]}
    # a summary with no trainer run at all is not stored as a session of its own
    lone = _collector(tmp_path / "other")
    lone.feed_stdout([SFT_LINES[3]])
    pts, _ = lone.poll(final=True)
    assert pts == [] and lone.tracker.sessions == {}


def test_tensorboard_epoch_and_flos_are_not_series_and_the_summary_is_stored_once(tmp_path, store):
    from torch.utils.tensorboard import SummaryWriter

    c = _collector(tmp_path, store=store)
    c.feed_stdout([_merged(i, line) for i, line in enumerate(SFT_LINES)])
    _pump(store, c, final=False)
    writer = SummaryWriter(str(c.workspace / "output" / "runs" / "x"))
    for entry in EXACT:       # TensorBoardCallback: every numeric value, epoch and total_flos too
        for k, v in {**entry, "total_flos": 1234.0}.items():
            if k != "step":
                writer.add_scalar(f"train/{k}", v, entry["step"])
    writer.close()
    _pump(store, c)
    rows = store.query("SELECT name, source FROM metrics")
    assert len(rows) == N_VALUES and not {"epoch", "total_flos"} & {r["name"] for r in rows}
    assert [r["source"] for r in rows if r["name"] == "train_runtime"] == ["tensorboard"]
    assert store.one("SELECT count(*) AS n FROM training_sessions")["n"] == 1
