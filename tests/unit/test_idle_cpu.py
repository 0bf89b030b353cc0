"""A warm grader's spare warms up at once only where the machine has a CPU to spare (grading/idle_cpu.py,
warm_server.warm_up_when)."""
import os
import subprocess
import sys
import time

import psutil
import pytest

from autorl_tui.grading import warm_server
from autorl_tui.grading.idle_cpu import IdleGauge
from tests.support.waiting import wait_for

BUSY = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end:\n    pass\n"


def _stat(path, idle, busy, cpus=2):
    lines = [f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0"]
    lines += [f"cpu{i} 0 0 0 0 0 0 0 0 0 0" for i in range(cpus)]
    path.write_text("\n".join(lines + ["intr 1 2 3", "ctxt 5"]) + "\n")


def test_the_idle_share_of_the_ticks_over_a_span_times_the_cpus(tmp_path):
    stat = tmp_path / "stat"
    _stat(stat, idle=1000, busy=500, cpus=4)
    gauge = IdleGauge(str(stat))
    _stat(stat, idle=1030, busy=590, cpus=4)          # 30 idle of 120 ticks on 4 CPUs
    assert gauge.idle_cpus() == 1.0
    _stat(stat, idle=1030, busy=690, cpus=4)
    # Every reading is younger than MIN_SPAN_S: the span counts from the oldest (30 idle of 220).
    assert gauge.idle_cpus() == 30 / 220 * 4
    gauge.MIN_SPAN_S = 0.0                             # now from the latest: no tick counted since
    assert gauge.idle_cpus() is None
    gauge.path = str(tmp_path / "missing")
    assert gauge.idle_cpus() is None


@pytest.mark.subprocess
def test_with_a_busy_process_per_cpu_the_machine_has_no_idle_cpu():
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(os.cpu_count() or 1)]
    try:
        gauge = IdleGauge()
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            pass                       # this process too: every CPU has someone to run
        assert gauge.idle_cpus() < warm_server.WARMUP_IDLE_CPUS
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()


class _Gauge:
    def __init__(self, reading):
        self.reading = reading

    def idle_cpus(self):
        return self.reading


def test_a_spare_warms_up_at_once_only_where_the_machine_left_a_cpu_idle():
    assert warm_server.warm_up_when(_Gauge(1.0)) is True
    assert warm_server.warm_up_when(_Gauge(warm_server.WARMUP_IDLE_CPUS)) is True
    assert warm_server.warm_up_when(_Gauge(0.2)) is False
    assert warm_server.warm_up_when(_Gauge(None)) is True      # cannot tell: as before


@pytest.mark.subprocess
def test_the_servers_reading_of_a_busy_machine_holds_its_spares_warm_up_back():
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(os.cpu_count() or 1)]
    try:
        gauge = IdleGauge()
        wait_for(lambda: all(psutil.Process(p.pid).cpu_times().user > 0.3 for p in busy), 60, "the busy loops")
        assert warm_server.warm_up_when(gauge) is False
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
