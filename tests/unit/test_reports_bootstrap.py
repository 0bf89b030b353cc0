"""The paired bootstrap band of a held-out accuracy change (reports/bootstrap.py), against cases
worked out by hand: bands that cannot move, a band over two questions, a binomial band, and that
the pairing (not two separate resamples) is what is resampled."""

import math

import pytest

from autorl_tui.reports.bootstrap import band_verdict, paired_band


def binomial_quantile(n: int, p: float, q: float) -> int:
    """Smallest k with P(Bin(n, p) <= k) >= q."""
    total = 0.0
    for k in range(n + 1):
        total += math.comb(n, k) * p ** k * (1 - p) ** (n - k)
        if total >= q:
            return k
    return n


def test_no_pairs_no_band():
    assert paired_band([]) is None


def test_unchanged_questions_give_a_zero_band_even_when_half_are_right():
    # 10 questions right for both, 10 wrong for both: every resample's mean change is 0. An unpaired
    # bootstrap (base and trained resampled apart) would spread around 0 by ±20 points.
    b = paired_band([(1, 1)] * 10 + [(0, 0)] * 10)
    assert (b["n"], b["observed"], b["low"], b["high"]) == (20, 0.0, 0.0, 0.0)
    assert band_verdict(b)[0] == "flat"


def test_every_question_fixed_gives_a_band_at_plus_100():
    b = paired_band([(0, 1)] * 7)
    assert (b["observed"], b["low"], b["high"]) == (100.0, 100.0, 100.0)
    verdict, why = band_verdict(b)
    assert verdict == "up" and "above 0" in why and "7 held-out question(s)" in why


def test_every_question_broken_gives_a_band_below_zero():
    b = paired_band([(1, 0)] * 3 + [(1, 1)] * 1)
    assert b["observed"] == -75.0 and b["high"] < 0
    assert band_verdict(b)[0] == "regressed"


def test_two_questions_one_fixed():
    # resample means: 0 (both draws the unchanged one, p = 1/4), 50 (p = 1/2), 100 (p = 1/4); the
    # 2.5% and 97.5% points of 1,000 resamples are 0 and 100
    b = paired_band([(0, 1), (1, 1)])
    assert (b["observed"], b["low"], b["high"]) == (50.0, 0.0, 100.0)
    assert band_verdict(b)[0] == "flat"


def test_fifteen_fixed_of_twenty_is_a_binomial_band_that_excludes_zero():
    # a resample's mean change is 100 · K / 20 with K ~ Bin(20, 0.75): its 2.5% and 97.5% points are
    # 100 · 11 / 20 = 55 and 100 · 18 / 20 = 90 (P(K <= 10) = 1.4%, P(K <= 11) = 4.1%; P(K >= 19) =
    # 2.4%); one question of 20 = 5 points of slack for 1,000 draws
    b = paired_band([(0, 1)] * 15 + [(0, 0)] * 5)
    assert b["observed"] == 75.0
    assert binomial_quantile(20, 0.75, 0.025) == 11 and binomial_quantile(20, 0.75, 0.975) == 18
    assert abs(b["low"] - 55.0) <= 5.0 and abs(b["high"] - 90.0) <= 5.0
    assert b["low"] > 0
    assert band_verdict(b)[0] == "up"


def test_one_fixed_of_thirty_is_within_noise():
    # +3.3 points: 1 of 30 held-out questions; a resample misses it with p = (29/30)^30 = 36%
    b = paired_band([(0, 1)] + [(0, 0)] * 29)
    assert b["observed"] == pytest.approx(100 / 30)
    assert b["low"] == 0.0 and b["high"] >= 100 / 30
    verdict, why = band_verdict(b)
    assert verdict == "flat" and "within noise" in why


def test_fixed_and_broken_cancel():
    b = paired_band([(0, 1)] * 4 + [(1, 0)] * 4 + [(0, 0)] * 12)
    assert b["observed"] == 0.0 and b["low"] < 0 < b["high"]
    assert b["low"] == pytest.approx(-b["high"], abs=10.0)


def test_reproducible_with_its_seed_and_settings_recorded():
    pairs = [(0, 1)] * 5 + [(1, 0)] * 2 + [(0, 0)] * 13
    a, b = paired_band(pairs), paired_band(pairs)
    assert a == b and (a["resamples"], a["seed"], a["level"]) == (1000, 0, 0.95)
    other = paired_band(pairs, seed=1)
    assert other["observed"] == a["observed"] and other["resamples"] == 1000


def test_bad_settings_are_refused():
    with pytest.raises(ValueError):
        paired_band([(0, 1)], resamples=0)
    with pytest.raises(ValueError):
        paired_band([(0, 1)], level=1.0)
