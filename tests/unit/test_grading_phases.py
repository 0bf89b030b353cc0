"""The phase breakdown of a grading's wall time (grading_host/grading_client.phase_breakdown)."""

from autorl_tui.grading_host.grading_client import PHASES, phase_breakdown


def stamps_every(step: float) -> dict:
    out = {"start": 100.0}
    for i, (stamp, _) in enumerate(PHASES, 1):
        out[stamp] = 100.0 + i * step
    return out


def test_each_phase_is_the_time_since_the_previous_stamp_and_they_add_up():
    stamps = stamps_every(0.5)
    phases = phase_breakdown(stamps, {"inference_s": 0.3})
    assert phases["prepare"] == 0.5 and phases["finish"] == 0.5
    assert phases["inference"] == 0.3 and phases["scoring"] == 0.2 and "evaluate" not in phases
    assert phases["total"] == 0.5 * len(PHASES)
    assert abs(sum(v for k, v in phases.items() if k != "total") - phases["total"]) < 1e-9


def test_a_missing_stamp_counts_in_the_next_phase():
    stamps = stamps_every(1.0)
    del stamps["accepted"], stamps["child_ready"]           # the cold path: no server
    phases = phase_breakdown(stamps, {})
    assert "to_server" not in phases and "child_start" not in phases
    assert phases["read_request"] == 3.0
    assert phases["evaluate"] == 1.0                        # no inference timing: not split


def test_garbage_from_the_worker_is_ignored():
    stamps = stamps_every(1.0)
    stamps.update(loaded="soon", evaluated=True, request_read=50.0)    # not numbers, or going back in time
    phases = phase_breakdown(stamps, {"inference_s": "fast"})
    assert all(isinstance(v, float) and v >= 0 for v in phases.values())
    assert phases["total"] == len(PHASES)
    assert phase_breakdown({"loaded": 1.0}, {}) == {}
