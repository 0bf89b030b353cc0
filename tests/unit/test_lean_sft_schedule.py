"""lean_sft.py's learning-rate schedule: a cosine over the training's progress, paced by the steps when
there is time to spare and by the clock when `--stop_at` comes first (a loaded machine), so the rate
reaches 0 when training stops instead of being cut off near its peak (the DeepSearchQA engine test at
load 15 stopped at step 747 of 4,000 with the rate at 92 % of its peak)."""

import math
import sys
from pathlib import Path

import pytest

PIPELINE = Path(__file__).resolve().parents[2] / "autorl_tui" / "builtin" / "agents" / "reference" / "pipeline"


@pytest.fixture
def lr_factor():
    sys.path.insert(0, str(PIPELINE))
    try:
        from lean_sft import lr_factor
        yield lr_factor
    finally:
        sys.path.remove(str(PIPELINE))


def cosine(progress: float) -> float:
    return 0.5 * (1 + math.cos(math.pi * progress))


def test_with_time_to_spare_the_steps_set_the_pace(lr_factor):
    now = [0.0]
    factor = lr_factor(100, 0.0, 1000.0, clock=lambda: now[0])
    assert factor(0) == pytest.approx(1 / 5)           # warmup: the first 5 % of the steps
    now[0] = 100.0                                     # a tenth of the time, half of the steps
    assert factor(50) == pytest.approx(cosine(0.5))
    now[0] = 200.0
    assert factor(100) == pytest.approx(0.0)
    plain = lr_factor(100, 0.0, 0.0, clock=lambda: 1e12)   # no --stop_at: the clock is not read
    assert [plain(s) for s in (10, 50, 90)] == pytest.approx([cosine(0.1), cosine(0.5), cosine(0.9)])


def test_behind_pace_the_clock_anneals_the_rate_to_zero_at_stop_at(lr_factor):
    now = [0.0]
    factor = lr_factor(4000, 0.0, 1000.0, clock=lambda: now[0])
    now[0] = 500.0                                     # half the time spent, a tenth of the steps done
    assert factor(400) == pytest.approx(cosine(0.5))
    now[0] = 900.0
    assert factor(700) == pytest.approx(cosine(0.9)) and factor(700) < 0.03
    now[0] = 1000.0                                    # stop_at: the last steps at no rate at all
    assert factor(747) == pytest.approx(0.0)
    now[0] = 5000.0                                    # past it: still 0, never back up the cosine
    assert factor(800) == pytest.approx(0.0)
