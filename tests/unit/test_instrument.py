import json

from autorl_tui.instrument.filetail import FileTail
from autorl_tui.instrument.metrics import MetricsCollector, parse_metrics_line
from autorl_tui.instrument.revisions import RevisionTracker


def test_filetail_returns_only_complete_new_lines_and_resumes_from_offset(tmp_path):
    f = tmp_path / "out.log"
    f.write_bytes(b"one\ntwo\nthr")
    tail = FileTail(f)
    assert tail.read_lines() == ["one", "two"]
    assert tail.read_lines() == []
    with open(f, "ab") as fh:
        fh.write(b"ee\nfour\n")
    assert tail.read_lines() == ["three", "four"]
    resumed = FileTail(f, offset=tail.offset)   # a restarted engine resumes here
    with open(f, "ab") as fh:
        fh.write(b"five\nsix")
    assert resumed.read_lines() == ["five"]
    assert resumed.read_lines(final=True) == ["six"]


def test_filetail_restarts_when_the_file_is_truncated(tmp_path):
    f = tmp_path / "out.log"
    f.write_text("a\nb\n")
    tail = FileTail(f)
    assert tail.read_lines() == ["a", "b"]
    f.write_text("c\n")
    assert tail.read_lines() == ["c"]


def test_filetail_splits_absurdly_long_lines(tmp_path):
    f = tmp_path / "out.log"
    f.write_bytes(b"x" * 200_000)
    lines = FileTail(f).read_lines()
    assert sum(len(l) for l in lines) == 200_000 - 200_000 % (64 * 1024) and len(lines) == 3


def test_metrics_line_formats():
    rec, err = parse_metrics_line(json.dumps({"ts": 5.0, "step": 3, "phase": "grpo",
                                              "metrics": {"reward": 0.5, "kl": "nan", "note": "x", "ok": True}}))
    assert err is None
    assert rec["values"] == {"reward": 0.5, "kl": None}      # NaN is stored as NULL
    assert rec["step"] == 3 and rec["phase"] == "grpo" and rec["ts"] == 5.0
    flat, _ = parse_metrics_line('{"step": 1, "loss": 2.5, "epoch": 0.1}')
    assert flat["values"] == {"loss": 2.5}
    assert parse_metrics_line("not json")[1].startswith("not JSON")
    assert parse_metrics_line("[1, 2]")[1] == "not a JSON object"


def test_collector_reads_trainer_state_once_and_follows_growth(tmp_path):
    (tmp_path / "logs").mkdir()
    ckpt = tmp_path / "output" / "v1" / "checkpoint-10"
    ckpt.mkdir(parents=True)
    state = {"log_history": [{"step": 5, "loss": 1.0, "epoch": 0.5}, {"step": 10, "loss": 0.8}]}
    (ckpt / "trainer_state.json").write_text(json.dumps(state))
    c = MetricsCollector(tmp_path)
    pts, _ = c.poll(final=True)
    assert [(p.name, p.step, p.source) for p in pts] == [("loss", 5, "trainer_state"), ("loss", 10, "trainer_state")]
    state["log_history"].append({"step": 15, "loss": 0.7, "reward": 0.2})
    (ckpt / "trainer_state.json").write_text(json.dumps(state))
    pts, _ = c.poll(final=True)
    assert sorted((p.name, p.step) for p in pts) == [("loss", 15), ("reward", 15)]
    again = MetricsCollector(tmp_path, offsets=c.offsets())   # resumed: nothing re-ingested
    assert again.poll(final=True)[0] == []


def test_revisions_only_when_code_changed_and_text_only(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print(1)\n")
    (code / "weights.bin").write_bytes(b"\0\1\2")
    blobs = {}

    def put(data):
        blobs[hash(data)] = data
        return str(hash(data))

    t = RevisionTracker(code, debounce_s=0)
    manifest, skipped, total = t.snapshot(put)
    assert list(manifest) == ["train.py"] and skipped == ["weights.bin"] and total == 9
    assert t.snapshot(put) is None            # unchanged: no new revision
    (code / "train.py").write_text("print(2)\n")
    assert t.snapshot(put)[0]["train.py"] != manifest["train.py"]
