"""The pure parts of Ray placement groups and runtime_env (executors/ray_groups.py,
ray_runtime.py): a run's group is named as its attempt's actor and holds its whole request in one
bundle; the engine ships its node-side settings and its code's identity, and a node whose code
differs is refused with a one-line fix."""

from autorl_tui.executors.ray import actor_name
from autorl_tui.executors.ray_groups import bundles, run_prefix
from autorl_tui.executors.ray_runtime import CODE_VAR, code_identity, mismatch, runtime_env, software_verdict


def test_a_run_s_groups_share_its_prefix_and_no_other_run_s(tmp_path):
    home = tmp_path / "home"
    assert actor_name(home, "r0001", 2) == run_prefix(home, "r0001") + "2"
    assert not actor_name(home, "r00012", 1).startswith(run_prefix(home, "r0001") + "1-")
    assert run_prefix(home, "r0001") != run_prefix(tmp_path / "other", "r0001")     # per home


def test_one_bundle_holds_the_whole_request_without_zero_entries():
    assert bundles({"GPU": 2.0, "CPU": 4.0, "memory": 0.0, "a100": 1.0}) == [{"GPU": 2.0, "CPU": 4.0, "a100": 1.0}]


def test_runtime_env_ships_the_node_side_settings_and_the_code_identity(monkeypatch):
    monkeypatch.setenv("AUTORL_GRADER_MEMORY", "3g")
    monkeypatch.setenv("AUTORL_WARM_GRADER", "0")
    monkeypatch.setenv("AUTORL_HOME", "/engine/only")        # the engine's own: not shipped
    for name in ("AUTORL_JUDGE_URL", "AUTORL_JUDGE_CACHE", "AUTORL_AGENT_RUNTIME"):   # the caller's, if any
        monkeypatch.delenv(name, raising=False)
    env = runtime_env()["env_vars"]
    assert env == {"AUTORL_GRADER_MEMORY": "3g", "AUTORL_WARM_GRADER": "0", CODE_VAR: code_identity()}
    version, _, digest = code_identity().partition("+")
    assert version and len(digest) == 12


def test_a_node_with_other_code_is_refused_naming_it_and_the_fix():
    assert mismatch("0.1.0+aaaaaaaaaaaa", "0.1.0+aaaaaaaaaaaa") is None
    assert mismatch(None, "0.1.0+a") == "the engine's code identity did not reach it (runtime_env)"
    results = [{"node_id": "n1" * 10, "hostname": "gpu-a", "ok": True, "why": ""},
               {"node_id": "n2" * 10, "hostname": "gpu-b", "ok": False,
                "why": mismatch("0.1.0+bbbbbbbbbbbb", "0.1.0+cccccccccccc")}]
    verdict = software_verdict(results)
    assert verdict is not None and "\n" not in verdict
    assert "gpu-b (n2n2n2n2n2n2): it runs autorl-tui 0.1.0+cccccccccccc, the engine 0.1.0+bbbbbbbbbbbb" in verdict
    assert "gpu-a" not in verdict and "Install the same autorl-tui on every node" in verdict
    assert software_verdict(results[:1]) is None

