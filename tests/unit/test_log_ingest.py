"""Bounded log ingestion: batches are bounded, lines past a batch are read again (never lost or
duplicated), and the per-run cap stores one clean prefix and counts the rest."""

from autorl_tui.instrument.filetail import FileTail
from autorl_tui.instrument.log_ingest import BATCH_LINES, LogIngest


def _write(path, start, n):
    with open(path, "a") as fh:
        fh.writelines(f"line {i}\n" for i in range(start, start + n))


def test_bounded_reads_resume_at_the_first_line_not_returned(tmp_path):
    log = tmp_path / "stdout.log"
    _write(log, 0, 2500)
    with open(log, "a") as fh:
        fh.write("partial")
    tail = FileTail(log)
    got = []
    while True:
        lines = tail.read_lines(final=True, max_lines=1000)
        got += lines
        if tail.exhausted:
            break
        assert len(lines) == 1000
    assert got == [f"line {i}" for i in range(2500)] + ["partial"]
    assert tail.offset == log.stat().st_size
    small = FileTail(log, max_read=100)
    lines = small.read_lines(max_bytes=100)     # one chunk: the lines it completes, the rest kept
    assert lines == [f"line {i}" for i in range(len(lines))] and not small.exhausted
    assert small.read_lines()[0] == f"line {len(lines)}"


def test_the_cap_stores_a_prefix_and_counts_the_rest(tmp_path):
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    _write(out, 0, 5000)
    err.write_text("oops\n")
    ingest = LogIngest(FileTail(out), FileTail(err), None, stored_events=0, stored_bytes=0, max_events=1500)
    stored, truncations = [], 0
    while True:
        batch = ingest.read_batch(final=True)
        assert len(batch.lines) <= 2 * BATCH_LINES
        stored += batch.lines
        truncations += batch.truncated_now
        if batch.exhausted:
            break
    assert len(stored) == 1500 and truncations == 1
    assert [line for s, line in stored if s == "stdout"][:1000] == [f"line {i}" for i in range(1000)]
    assert ingest.dropped_lines == 5001 - 1500


def test_a_resumed_run_that_already_reached_its_cap_stores_nothing_more(tmp_path):
    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    _write(out, 0, 10)
    ingest = LogIngest(FileTail(out), FileTail(err), None, stored_events=100, stored_bytes=0, max_events=100)
    batch = ingest.read_batch(final=True)
    assert batch.lines == [] and batch.dropped_lines == 10 and not batch.truncated_now
