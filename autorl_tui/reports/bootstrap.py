"""A paired bootstrap band of a held-out accuracy change: how far the change could move if the
held-out questions had been drawn again. One run has no seed spread; its questions still vary.

The pairs are (base correct, trained correct) per held-out question, the same questions for both
models. A resample draws as many questions as there are, with replacement (a fixed seed, so a
report is reproducible), and takes the mean of trained − base over them; the band is the central
`level` share of those means (percentile bootstrap), in points (0-100) like runs.improvement."""

from __future__ import annotations

import math
import random

RESAMPLES = 1000
SEED = 0
LEVEL = 0.95


def paired_band(pairs: list[tuple[float, float]], resamples: int = RESAMPLES, seed: int = SEED,
                level: float = LEVEL) -> dict | None:
    """{n, observed, low, high, resamples, seed, level} of the mean change trained − base in points,
    or None without pairs. low and high are the sorted resampled means at ranks
    floor(α/2 · R) and ceil((1 − α/2) · R) − 1 (α = 1 − level, R = resamples)."""
    if not pairs:
        return None
    if resamples < 1 or not 0 < level < 1:
        raise ValueError(f"bootstrap needs resamples >= 1 and 0 < level < 1 (got {resamples}, {level})")
    diffs = [100.0 * (float(t) - float(b)) for b, t in pairs]
    n = len(diffs)
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(resamples))
    alpha = 1.0 - level
    low = means[math.floor(alpha / 2 * resamples)]
    high = means[max(0, math.ceil((1 - alpha / 2) * resamples) - 1)]
    return {"n": n, "observed": sum(diffs) / n, "low": low, "high": high, "resamples": resamples,
            "seed": seed, "level": level}


def band_verdict(band: dict) -> tuple[str, str]:
    """(verdict, why) of a change judged by its band alone: `up` when the whole band is above 0,
    `regressed` when it is below, `flat` when it holds 0."""
    span = f"{100 * band['level']:.0f}% bootstrap band [{band['low']:+.2f}, {band['high']:+.2f}]"
    what = f"mean {band['observed']:+.2f}, {span} over {band['n']} held-out question(s), 1 seed"
    if band["low"] > 0:
        return "up", f"{what}: above 0"
    if band["high"] < 0:
        return "regressed", f"{what}: below 0"
    return "flat", f"{what}: holds 0, within noise"
