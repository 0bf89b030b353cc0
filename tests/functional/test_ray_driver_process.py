"""The engine's Ray driver is a child process (executors/ray_client.py, ray_driver.py): a real child
started by the first call, whose death (what Ray does to a driver whose head stays away) fails its
calls in flight with ClusterUnreachable instead of ending the caller, after which a new child is
started, not before a backoff. No cluster is needed: the calls here are to heads that refuse or
never answer."""

import os
import signal
import socket
import time

import pytest

from autorl_tui.executors.ray_client import ClusterUnreachable, DriverProcess

pytestmark = pytest.mark.subprocess


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def test_a_lost_driver_fails_its_calls_and_a_new_one_starts_after_a_backoff(tmp_path):
    silent = socket.socket()          # a head that accepts connections and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    driver = DriverProcess(tmp_path / "ray-driver.log")
    try:
        with pytest.raises(ClusterUnreachable, match="cannot reach the Ray head"):
            driver.call_sync("connect", _closed_port(), timeout=120)
        assert driver.running and driver.starts == 1      # the child answered; it lives on
        hanging = driver.call("connect", f"127.0.0.1:{silent.getsockname()[1]}")
        pid = driver._proc.pid
        time.sleep(0.5)
        assert not hanging.done()
        os.kill(pid, signal.SIGKILL)                      # what Ray's own exit looks like to the engine
        with pytest.raises(ClusterUnreachable, match="driver process was lost"):
            hanging.result(timeout=60)
        assert not driver.running
        with pytest.raises(ClusterUnreachable, match="the next one starts in"):
            driver.call_sync("connect", _closed_port(), timeout=60)     # too soon: no new child yet
        assert driver.starts == 1
        deadline = time.monotonic() + 30
        while True:
            try:
                driver.call_sync("connect", _closed_port(), timeout=120)
            except ClusterUnreachable as exc:
                if "cannot reach the Ray head" in str(exc):
                    break
                assert time.monotonic() < deadline, exc
                time.sleep(0.2)
        assert driver.starts == 2 and driver.running
        second = driver._proc.pid
        driver.close()                                    # the engine stops: so does its driver
        assert not driver.running
        with pytest.raises(ProcessLookupError):
            os.kill(second, 0)
        with pytest.raises(ClusterUnreachable, match="closed"):      # and none starts after that
            driver.call_sync("connect", _closed_port(), timeout=60)
        assert driver.starts == 2
    finally:
        silent.close()
        driver.reset("test over")
