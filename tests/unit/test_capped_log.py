"""The on-disk cap of an agent's raw log (executors/capped_log.py), on real files and pipes."""

import os
import re

from autorl_tui.executors.capped_log import CappedLog, agent_pipe, copy_pipe


def test_under_the_cap_everything_is_kept_unchanged(tmp_path):
    log = CappedLog(tmp_path / "stdout.log", 1000)
    for i in range(10):
        log.write(b"line %d\n" % i)
    log.close()
    assert (tmp_path / "stdout.log").read_bytes() == b"".join(b"line %d\n" % i for i in range(10))


def test_past_the_cap_head_marker_count_and_whole_tail_lines(tmp_path):
    printed = b"".join(b"row %05d\n" % i for i in range(2000))            # 20,000 bytes
    log = CappedLog(tmp_path / "stdout.log", 4000)                         # head 3000, tail 1000
    for start in range(0, len(printed), 333):                              # writes that cut lines anywhere
        log.write(printed[start:start + 333])
    log.close()
    data = (tmp_path / "stdout.log").read_bytes()
    assert data[:3000] == printed[:3000]
    assert re.match(rb"\n?\[autorl-tui: stdout.log reached its cap of 3.9 KiB", data[3000:])
    m = re.search(rb"\[autorl-tui: ([\d,]+) bytes of stdout.log dropped here; the last ([\d,]+) bytes follow\]\n", data)
    dropped, kept = (int(g.replace(b",", b"")) for g in m.groups())
    tail = data[m.end():]
    assert len(tail) == kept and tail == printed[-kept:] and tail.startswith(b"row ")
    assert 3000 + dropped + kept == len(printed)
    assert len(data) < 4000 + 300


def test_a_pipe_is_copied_until_every_writer_is_gone(tmp_path):
    r, w = agent_pipe()
    log = CappedLog(tmp_path / "stderr.log", 1 << 20)
    thread = copy_pipe(r, log)
    os.write(w, b"x" * 100_000)
    os.close(w)
    thread.join(10)
    log.close()
    assert not thread.is_alive() and (tmp_path / "stderr.log").stat().st_size == 100_000
