"""grading/malloc_tuning.py: with glibc's malloc kept from handing freed blocks back, a generation
reuses its pages instead of faulting fresh ones in at every decoding step."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAULTS = """
import json, resource, sys
from autorl_tui.grading.malloc_tuning import keep_freed_memory
tuned = sys.argv[2] == "tuned" and keep_freed_memory()
from autorl_tui.grading.inference import TransformersPolicy
policy = TransformersPolicy(sys.argv[1], threads=1, batch_size=64)
prompts = [f"what is {i} + {i * 7} ?" for i in range(48)]
faults = []
for _ in range(4):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    policy.generate(prompts, max_tokens=24)
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"tuned": tuned, "faults": faults}))
"""


def _faults(model: Path, mode: str) -> dict:
    out = subprocess.run([sys.executable, "-c", FAULTS, str(model), mode], capture_output=True, text=True, timeout=300,
                         cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1",
                                        "HF_DEACTIVATE_ASYNC_LOAD": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.subprocess
def test_a_generation_reuses_its_pages_once_freed_memory_is_kept(tiny_model_dir):
    default, tuned = _faults(tiny_model_dir, "default"), _faults(tiny_model_dir, "tuned")
    assert tuned["tuned"] is True and default["tuned"] is False
    # Once the first generations have grown the heap, the next ones fault (almost) nothing in.
    assert sum(tuned["faults"][1:]) * 4 < sum(default["faults"][1:]), (default, tuned)
