"""A log flood (issue 24, breach 6): an agent prints millions of stdout lines as fast as it can.
The grading API keeps answering (p95 latency under 1 s, measured for the whole time the run is
running, which includes the harness catching up), the events stored for the run stop at the
plan's log cap with one 'log truncated' event, the store stays small, the full log stays in its
file, and the run ends normally.

FLOOD_LINES sets the line count (default 6 M with the local executor, the flood of the attack run:
about a minute here; 1 M with Docker, whose log API copies about 15k lines/s: 6 M took 8 minutes,
p95 14 ms)."""

import os
import re
import shutil
import statistics
from pathlib import Path

import pytest

from tests.support.fixed_model import build_fixed_answer_model
from tests.support.harness import install_model, make_reachable_home
from tests.support.log_flood import count_lines, db, run_flood

pytestmark = pytest.mark.slow
LOG_CAP = 20_000


@pytest.mark.parametrize("executor", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_a_log_flood_is_capped_and_the_api_keeps_answering(executor, tiny_model_dir, tmp_path, docker_available):
    if executor == "docker" and not docker_available:
        pytest.skip("DOCKER ENGINE NOT REACHABLE: the docker flood test did not run")
    # Docker's log API copies about 15k lines/s here: 6 M lines take 8 minutes, so 1 M by default
    lines = int(os.environ.get("FLOOD_LINES") or (6_000_000 if executor == "local" else 1_000_000))
    home = make_reachable_home()
    home.mkdir(parents=True)
    install_model(tiny_model_dir, home)
    try:
        result = run_flood(home, tmp_path, lines, {"events": LOG_CAP}, executor)
        run, counts, lat = result["run"], result["counts"], result["latencies"]
        assert run["state"] == "done", run
        assert run["best_dev_score"] is not None and run["test_score"] is not None
        log_events = counts.get("stdout", 0) + counts.get("stderr", 0) + counts.get("action", 0)
        assert LOG_CAP - 10 <= log_events <= LOG_CAP
        assert sum(counts.values()) <= LOG_CAP + 100
        assert sum("log truncated" in m for m in result["messages"]) == 1
        assert result["store_bytes"] < 64 * 1024**2
        log_dir = Path(db(home).execute("SELECT log_dir FROM attempts").fetchone()[0])
        out_lines, err_lines = (count_lines(log_dir / name) for name in ("stdout.log", "stderr.log"))
        assert out_lines == lines                                                       # the full log is kept
        dropped = out_lines + err_lines - counts.get("stdout", 0) - counts.get("stderr", 0)
        assert any(f"{dropped:,} log lines" in m for m in result["messages"]), result["messages"]
        assert len(lat) >= 5
        p95 = statistics.quantiles(lat, n=20)[-1]
        print(f"\n{executor}: flood of {lines:,} lines: {len(lat)} API requests, p50 {statistics.median(lat) * 1000:.0f} ms, "
              f"p95 {p95 * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms; {log_events} log events stored, "
              f"store {result['store_bytes'] / 1024**2:.1f} MiB")
        assert p95 < 1.0
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)


@pytest.mark.parametrize("executor,lines", [("local", 1_000_000),
                                            pytest.param("docker", 300_000, marks=pytest.mark.docker)])
def test_the_raw_log_file_is_capped_on_disk_with_its_head_and_tail(tmp_path, executor, lines, docker_available):
    """A flood far past `log_cap.file_bytes`: stdout.log keeps its head, a marker, the count of bytes
    dropped and the stream's last lines; every byte printed is accounted for; the run ends normally."""
    if executor == "docker" and not docker_available:
        pytest.skip("DOCKER ENGINE NOT REACHABLE: the docker flood test did not run")
    cap = 1 << 20
    home = make_reachable_home()
    home.mkdir(parents=True)
    build_fixed_answer_model(home / "models" / "tiny", "11", chat_template="{{ messages[-1]['content'] }}")
    try:
        result = run_flood(home, tmp_path, lines, {"events": 5_000, "file_bytes": cap}, executor)
        assert result["run"]["state"] == "done", result["run"]
        assert sum("log truncated" in m for m in result["messages"]) == 1      # the store's cap, as before
        log_dir = Path(db(home).execute("SELECT log_dir FROM attempts").fetchone()[0])
        data = (log_dir / "stdout.log").read_bytes()
        full = b"".join(b"flood line %d\n" % i for i in range(lines))       # what the agent printed
        assert len(data) <= cap + 1024, len(data)
        head = cap - cap // 4                                                # the rest of the cap is the tail's
        assert data[:head] == full[:head]
        marker, _, rest = data[head:].partition(b"]\n")
        assert marker.lstrip(b"\n").startswith(b"[autorl-tui: stdout.log reached its cap of 1.0 MiB"), marker
        line, _, tail = rest.partition(b"\n")
        m = re.fullmatch(rb"\[autorl-tui: ([\d,]+) bytes of stdout.log dropped here; the last ([\d,]+) bytes follow\]",
                         line)
        assert m, line
        dropped, kept = (int(g.replace(b",", b"")) for g in m.groups())
        assert head + dropped + kept == len(full)                            # every byte printed accounted for
        assert len(tail) == kept and tail == full[-kept:] and kept >= (cap // 4) - 64
        assert tail.startswith(b"flood line ")                               # from a line start
        assert count_lines(log_dir / "stderr.log") == 0
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)
