"""The scheduling policy on a declared fake inventory (ids only, no CUDA)."""

import pytest

from autorl_tui.executors.gpus import inventory, parse_gpu_ids
from autorl_tui.engine.scheduling import (ActiveRun, Policy, QueuedRun, RetryPolicy, decide, next_retry_delay,
                                          order_key, pick_gpus, plan_starts, should_retry, unsatisfiable)
from autorl_tui.engine.scheduling_sim import Job, simulate, workload
from autorl_tui.exitcodes import UsageError

GPUS8 = [str(i) for i in range(8)]


def test_one_run_per_gpu_and_explicit_ids():
    queue = [QueuedRun(f"r{i}", gpus=1, queue_pos=i) for i in range(10)]
    starts = plan_starts(queue, GPUS8, now=0)
    assert [rid for rid, _ in starts] == [f"r{i}" for i in range(8)]
    assert sorted(g for _, gs in starts for g in gs) == GPUS8


def test_priority_then_move_to_front_order():
    queue = [QueuedRun("low", 1, priority=0, queue_pos=0), QueuedRun("high", 1, priority=5, queue_pos=9),
             QueuedRun("front", 1, priority=0, queue_pos=-1)]
    assert [r for r, _ in plan_starts(queue, ["0"], now=0)] == ["high"]
    assert [r for r, _ in plan_starts(queue, ["0", "1"], now=0)] == ["high", "front"]
    assert sorted(queue, key=order_key)[-1].run_id == "low"


def test_paused_queue_and_slots_and_non_queued_states():
    queue = [QueuedRun("a", 0), QueuedRun("b", 0, queue_pos=1), QueuedRun("c", 0, queue_pos=2, state="running")]
    assert plan_starts(queue, [], now=0, paused=True) == []
    assert decide(queue, [], 0, paused=True).waiting == {"a": "queue paused", "b": "queue paused"}
    assert plan_starts(queue, [], now=0, free_slots=1) == [("a", [])]
    assert plan_starts(queue, [], now=0) == [("a", []), ("b", [])]


def test_retry_backoff_is_waited_out_without_blocking_others():
    queue = [QueuedRun("retry", 1, queue_pos=0, not_before=100), QueuedRun("next", 1, queue_pos=1)]
    d = decide(queue, ["0"], now=40)
    assert d.starts == [("next", ["0"])] and d.waiting["retry"] == "retry backoff: 60 s left"
    assert plan_starts(queue, ["0"], now=100)[0] == ("retry", ["0"])


def test_impossible_request_does_not_block_the_queue():
    queue = [QueuedRun("huge", 16), QueuedRun("small", 1, queue_pos=1)]
    d = decide(queue, GPUS8, 0)
    assert d.starts == [("small", ["0"])]
    assert "machine has 8" in d.waiting["huge"]
    assert "lower gpus_per_run" in unsatisfiable(16, 8)
    assert unsatisfiable(2, 8) is None


def test_multi_gpu_gets_close_ids():
    assert pick_gpus(["0", "3", "4", "7"], 2) == ["3", "4"]
    assert pick_gpus(["1", "2", "5", "6", "7"], 3) == ["5", "6", "7"]


def test_backfill_respects_the_reservation():
    # 2 GPUs free until t=100, then 4; the head asks 4: a reservation at t=100 with 0 spare.
    active = [ActiveRun("soon", ("0", "1"), expected_end=100), ActiveRun("late", ("2", "3", "4", "5"), 1000)]
    queue = [QueuedRun("big", 4, queue_pos=0, budget_s=500),
             QueuedRun("long", 1, queue_pos=1, budget_s=1000),
             QueuedRun("short", 1, queue_pos=2, budget_s=50)]
    d = decide(queue, GPUS8[6:], now=0, active=active)
    assert d.reserved_for == "big" and d.reserved_at == 100
    assert [r for r, _ in d.starts] == ["short"]          # ends before t=100: cannot delay "big"
    assert "would delay big" in d.waiting["long"]


def test_backfill_uses_spare_gpus_and_strict_fifo_does_not():
    active = [ActiveRun("busy", tuple(GPUS8[:7]), expected_end=100)]
    queue = [QueuedRun("big", 4, budget_s=500), QueuedRun("long", 1, queue_pos=1, budget_s=1000)]
    # at t=100 8 GPUs are free, "big" needs 4: 4 spare, so "long" may take one now
    assert [r for r, _ in plan_starts(queue, ["7"], 0, active=active)] == ["long"]
    assert plan_starts(queue, ["7"], 0, active=active, policy=Policy(backfill=False)) == []


def test_aging_when_ends_are_unknown():
    active = [ActiveRun("busy", tuple(GPUS8[:6]), expected_end=None)]
    queue = [QueuedRun("big", 4, enqueued_at=0), QueuedRun("small", 1, queue_pos=1, enqueued_at=0)]
    policy = Policy(reserve_after_s=600)
    assert [r for r, _ in plan_starts(queue, GPUS8[6:], 10, active=active, policy=policy)] == ["small"]
    d = decide(queue, GPUS8[6:], 700, active=active, policy=policy)
    assert d.starts == [] and "aging" in d.waiting["small"]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_simulated_8_gpus_never_double_booked_and_priorities_hold(seed):
    jobs = workload(seed, n_jobs=80, mean_interarrival=300.0, priorities=(0, 1, 2))
    result = simulate(jobs, GPUS8, keep_decisions=True)      # raises DoubleBooking at the faulty event
    assert set(result.ends) == {j.run_id for j in jobs}
    for now, decision, queue, free in result.decisions:
        # independent check of every event: the starts fit the free set, disjointly
        given = [g for _, gs in decision.starts for g in gs]
        assert len(given) == len(set(given)) and set(given) <= set(free), now
        started = {rid for rid, _ in decision.starts}
        reserved = next((q for q in queue if q.run_id == decision.reserved_for), None)
        ordered = sorted(queue, key=order_key)
        free_left = len(free)
        for q in ordered:
            if q.run_id in started:
                free_left -= q.gpus
                continue
            lower_started = [s for s in ordered if s.run_id in started and s.priority < q.priority]
            if lower_started and q.gpus <= free_left:
                # a lower-priority run started while this one fit: only legal if GPUs are held for an
                # even earlier-ordered blocked run
                assert reserved is not None and order_key(reserved) < order_key(q), (now, q, lower_started)


def test_big_requests_are_not_starved_and_packing_beats_fifo():
    jobs = workload(7, n_jobs=80)
    ours, fifo = simulate(jobs, GPUS8), simulate(jobs, GPUS8, Policy(backfill=False))
    assert ours.efficiency > fifo.efficiency
    big = [j for j in jobs if j.gpus == 4]
    # every big run starts no later than under FIFO plus one longest budget (reservation bound)
    longest = max(j.budget_s for j in jobs)
    for j in big:
        assert ours.starts[j.run_id][0] <= fifo.starts[j.run_id][0] + longest


def test_no_reservation_would_starve_a_big_run():
    # a steady stream of 1-GPU runs keeps 7 GPUs busy; the 8-GPU run must still start
    jobs = [Job("big", 8, 1.0, 100, 100)] + [Job(f"s{i}", 1, i * 10.0, 70, 70) for i in range(200)]
    res = simulate(jobs, GPUS8)
    assert res.starts["big"][0] <= 1.0 + 70


def test_retry_policy():
    assert should_retry("infra", 1) and should_retry("infra", 2)
    assert not should_retry("infra", 3)
    for source in ("agent", "task", "grader", "budget", "user", None):
        assert not should_retry(source, 1)
    assert [next_retry_delay(n) for n in (1, 2, 3, 4, 5)] == [10, 30, 90, 270, 600]
    assert next_retry_delay(2, RetryPolicy(base_s=1, factor=2)) == 2
    with pytest.raises(ValueError):
        next_retry_delay(0)


def test_declared_inventory():
    assert parse_gpu_ids("0, 1,2") == ["0", "1", "2"]
    assert parse_gpu_ids([0, 3]) == ["0", "3"]
    assert parse_gpu_ids("none") == []
    with pytest.raises(UsageError, match="not valid"):
        parse_gpu_ids("0,x")
    with pytest.raises(UsageError, match="twice"):
        parse_gpu_ids("1,1")
    inv = inventory("0,1,2,3,4,5,6,7")
    assert inv.source == "declared" and inv.ids == GPUS8
    assert inventory("none").ids == [] and inventory([]).source == "none"
