"""The real grader worker as a subprocess on the real tiny model and the arith dev split."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.support.grader_worker import run_worker


@pytest.mark.slow
def test_worker_grades_the_tiny_model_on_arith_dev(tmp_path, tiny_model_dir):
    result = run_worker(tmp_path, model_path=str(tiny_model_dir))
    assert result["ok"] is True, result
    assert result["grader_version"] and result["scorer"] == "exact_match"
    assert len(result["samples"]) == 40 and result["metrics"]["n"] == 40
    assert 0 <= result["score"] <= 60          # the base model is weak on arith
    correct = sum(s["correct"] for s in result["samples"])
    assert result["score"] == pytest.approx(100 * correct / 40)
    for s in result["samples"]:
        assert s["output"] is not None and s["expected"].lstrip("-").isdigit()
        assert s["correct"] == (s["failure_kind"] is None)
        assert s["failure_kind"] in (None, "wrong_answer", "format_error", "truncated", "empty")
    t = result["timings"]
    assert set(t) == {"load_s", "inference_s", "scoring_s", "total_s"}
    assert 0 < t["inference_s"] < t["total_s"] and t["load_s"] > 0


def test_worker_reports_invalid_models_and_bad_requests(tmp_path):
    lora = tmp_path / "output" / "v1"
    lora.mkdir(parents=True)
    (lora / "adapter_config.json").write_text("{}")
    result = run_worker(tmp_path, model_path=str(lora))
    assert result["ok"] is False and result["error_kind"] == "invalid_model"
    assert "LoRA" in result["error"] and "merge" in result["error"]
    assert "total_s" in result["timings"] and result["grader_version"]

    req, res = tmp_path / "bad.json", tmp_path / "bad-result.json"
    req.write_text("{not json")
    proc = subprocess.run([sys.executable, "-m", "autorl_tui.grading.worker", str(req), str(res)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    bad = json.loads(res.read_text())
    assert bad["ok"] is False and bad["error_kind"] == "internal" and "cannot read request" in bad["error"]


@pytest.mark.slow
def test_vllm_that_cannot_start_falls_back_to_transformers_on_the_same_device(tmp_path, tiny_model_dir):
    """vLLM is not installed on this CPU machine: the grading asked for it (as the placement would on
    a GPU) runs with transformers on the request's device, and the result's placement says why."""
    placement = {"backend": "vllm", "device": "cpu", "devices": [], "tensor_parallel_size": 1,
                 "gpu_memory_utilization": 0.3, "max_model_len": 256, "enforce_eager": True}
    (tmp_path / "a").mkdir()
    result = run_worker(tmp_path / "a", model_path=str(tiny_model_dir), backend="vllm", placement=placement, limit=16)
    assert result["ok"] is True, result
    got = result["placement"]
    assert got["backend"] == "transformers" and got["device"] == "cpu" and got["device_used"] == "cpu"
    assert got["fallback"]["from"] == "vllm" and "gpu" in got["fallback"]["error"]
    assert got["gpu_memory_utilization"] == 0.3          # what was asked stays on record
    (tmp_path / "b").mkdir()
    plain = run_worker(tmp_path / "b", model_path=str(tiny_model_dir), limit=16)
    assert plain["placement"]["backend"] == "transformers" and "fallback" not in plain["placement"]
    assert [s["output"] for s in plain["samples"]] == [s["output"] for s in result["samples"]]
