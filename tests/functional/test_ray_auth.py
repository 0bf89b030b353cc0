"""The engine refuses a Ray cluster without token authentication (executors/ray_auth.py), with a
message naming how to turn it on, unless the plan says `cluster: {auth: none}`; then the reports
mark the run. Real Ray heads (`ray start --head`), the real CLI."""

from __future__ import annotations

import secrets

import pytest

from autorl_tui.exitcodes import UsageError
from autorl_tui.executors.base import ExecutorError
from autorl_tui.executors.ray_auth import check_cluster_auth, token_auth_enforced
from autorl_tui.store.isolation import recorded_exposures
from tests.support.harness import TASKS, cli, write_plan

pytest.importorskip("ray")
pytestmark = pytest.mark.slow


def test_an_unauthenticated_cluster_is_refused_with_the_fix_unless_the_plan_says_auth_none(tmp_path):
    from tests.support.ray_head import RayHead

    head = RayHead(token=None)
    try:
        home = tmp_path / "home"
        plan = write_plan(tmp_path / "plan.yaml", executor="ray", cluster={"address": head.address})
        proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(plan), home=home, timeout=300,
                   env={"RAY_ADDRESS": "", "RAY_AUTH_MODE": "disabled"})
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert f"the Ray cluster at {head.address} does not enforce token authentication" in proc.stderr
        assert "RAY_AUTH_MODE=token" in proc.stderr and "cluster: {auth: none}" in proc.stderr
        assert "Traceback" not in proc.stderr
        check_cluster_auth(head.address, "none")              # the plan's explicit choice: accepted
        with pytest.raises(ExecutorError, match="Ray Client"):
            check_cluster_auth(f"ray://127.0.0.1:{head.client}")
    finally:
        head.stop()
    bad = write_plan(tmp_path / "bad.yaml", executor="ray", cluster={"address": "x:1", "auth": "off"})
    proc = cli("--tasks-dir", str(TASKS), "--plain", "--batch", str(bad), home=home, timeout=120)
    assert proc.returncode == 2 and "cluster.auth must be `token`" in proc.stderr, proc.stderr


def test_a_cluster_with_token_authentication_is_accepted():
    from tests.support.ray_head import RayHead

    head = RayHead(token=secrets.token_hex(16))
    try:
        assert token_auth_enforced(head.address) is True
        check_cluster_auth(head.address)
    finally:
        head.stop()


def test_reports_mark_an_unauthenticated_cluster_and_the_host_network():
    spec = {"agent": {"network": "host"}, "options": {"cluster": {"auth": "none"}}}
    assert recorded_exposures(spec) == ["network: host", "ray cluster without token authentication"]
    assert recorded_exposures({"agent": {"network": "bridge"}, "options": {}}) == []
    from autorl_tui.catalog.plans import host_ports_of, parse_plan

    with pytest.raises(UsageError, match="host_ports must be a list"):
        parse_plan("tasks: [arith-small]\nagents: [x]\nbudget: 1m\nhost_ports: [http]\n")
    plan = parse_plan("tasks: [arith-small]\nagents: [x]\nbudget: 1m\nhost_ports: [8000]\n"
                      "driver_url: http://127.0.0.1:9000/v1\n")
    assert host_ports_of(plan.runs[0].options) == [8000, 9000]      # a loopback driver is named by the plan
    assert host_ports_of({"driver_url": "https://api.example.com/v1"}) == []
