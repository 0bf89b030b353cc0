"""A cached baseline is reused only for a grading with the same backend on the same kind of device
(issue 35): a vLLM baseline graded on a GPU is not the score of the CPU transformers grading a
later run of the same task and model would make, and a baseline recorded before the backend and
device were part of the key is graded again rather than trusted."""

import time

from autorl_tui.store import Store


def _baseline(store, grading, score):
    return store.add_baseline({"task": "arith-small", "model": "tiny@abc", "protocol_hash": "p", "grader_version": "7",
                               "split": "dev", "score": score, "metrics": {}, "created_at": time.time(),
                               "grading": grading})


def test_a_baseline_is_cached_per_backend_and_device(tmp_path):
    store = Store(tmp_path / "s.db")
    _baseline(store, "vllm/cuda", 61.0)
    store.flush()
    key = ("arith-small", "tiny@abc", "p", "7", "dev")
    assert store.cached_baseline(*key, "transformers/cpu") is None
    assert store.cached_baseline(*key, "transformers/cuda") is None
    assert store.cached_baseline(*key, "vllm/cuda")["score"] == 61.0
    _baseline(store, "transformers/cpu", 58.0)
    store.flush()
    assert store.cached_baseline(*key, "transformers/cpu")["score"] == 58.0
    store.close()


def test_a_baseline_from_before_the_key_had_the_device_is_not_reused(tmp_path):
    store = Store(tmp_path / "s.db")
    _baseline(store, None, 40.0)          # what a store migrated from version 6 holds
    store.flush()
    assert store.cached_baseline("arith-small", "tiny@abc", "p", "7", "dev", "transformers/cpu") is None
    store.close()
