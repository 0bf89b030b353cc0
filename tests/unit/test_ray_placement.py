"""Admission of Ray runs (executors/ray_placement.py): strict queue order, whole requests
on one node, what is held or pending counted, custom resources matched."""

from autorl_tui.executors.ray_placement import Request, admit, feasible

TWO_WORKERS = {"head": {"CPU": 1.0}, "w1": {"CPU": 3.0, "GPU": 2.0}, "w2": {"CPU": 3.0, "GPU": 2.0}}


def test_runs_fill_nodes_in_order_and_stop_at_the_first_that_does_not_fit():
    queue = [Request("a", gpus=1), Request("b", gpus=2), Request("c", gpus=1), Request("d", gpus=1)]
    # a -> w1 (1 left), b -> w2, c -> w1, d: nothing left.
    assert admit(queue, TWO_WORKERS, placed=[], pending=[]) == ["a", "b", "c"]


def test_a_request_is_never_split_across_nodes_and_order_is_strict():
    placed = [("w1", Request("x", gpus=1)), ("w2", Request("y", gpus=1))]   # one free GPU on each node
    assert admit([Request("big", gpus=2), Request("small", gpus=1)], TWO_WORKERS, placed, pending=[]) == []
    assert admit([Request("small", gpus=1), Request("big", gpus=2)], TWO_WORKERS, placed, pending=[]) == ["small"]


def test_pending_runs_take_room_first_and_an_unplaceable_pending_run_blocks_admission():
    assert admit([Request("n", gpus=2)], TWO_WORKERS, placed=[], pending=[Request("p", gpus=2)]) == ["n"]
    assert admit([Request("n", gpus=2)], TWO_WORKERS, placed=[], pending=[Request("p", gpus=2)] * 2) == []
    placed = [("w1", Request("x", gpus=1)), ("w2", Request("y", gpus=1))]
    assert admit([Request("n", gpus=1)], TWO_WORKERS, placed, pending=[Request("p", gpus=2)]) == []


def test_held_runs_on_a_node_that_left_free_nothing_and_custom_resources_must_match():
    alive = {"w2": TWO_WORKERS["w2"]}
    assert admit([Request("a", gpus=2)], alive, placed=[("w1", Request("x", gpus=2))], pending=[]) == ["a"]
    typed = Request("t", gpus=1, resources=(("a100", 1.0),))
    assert not feasible(typed, TWO_WORKERS)
    assert admit([typed], dict(TWO_WORKERS, w3={"GPU": 1.0, "CPU": 2.0, "a100": 1.0}), [], []) == ["t"]
    assert not feasible(Request("huge", gpus=3), TWO_WORKERS)


def test_admission_reads_the_background_view_and_never_waits_for_the_cluster():
    """`RayExecutor.admit` runs on the engine's loop: while fetching the nodes hangs (a head that
    does not answer) it decides at once (nothing starts until the nodes are known), and once the
    fetch returns it admits from what was fetched; a failed fetch keeps the last known nodes."""
    import threading
    import time

    from autorl_tui.executors.ray import RayExecutor
    from autorl_tui.executors.ray_view import ClusterView

    release, calls = threading.Event(), []
    nodes = [{"NodeID": n, "Alive": True, "Resources": dict(t)} for n, t in TWO_WORKERS.items()]

    def fetch():
        calls.append(threading.current_thread().name)
        if not release.wait(60):
            raise TimeoutError("never released")
        if len(calls) > 1:
            raise ConnectionError("the head went away")
        return nodes

    executor = RayExecutor(home="/nonexistent")
    executor.view = ClusterView(fetch)
    queue = [Request("a", gpus=2), Request("b", gpus=2)]
    t0 = time.monotonic()
    assert executor.admit(queue, []) == [] and executor.admit(queue, []) == []
    assert time.monotonic() - t0 < 1.0 and calls == ["ray-cluster-view"]      # one fetch, in its thread
    release.set()
    deadline = time.monotonic() + 30
    while executor.view.nodes is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert executor.admit(queue, []) == ["a", "b"]
    executor.view.kick(force=True)                    # the next refresh fails: the last known nodes stay
    while executor.view.error is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert executor.view.error == "the head went away" and executor.admit(queue, []) == ["a", "b"]


def test_admission_says_which_node_it_packed_each_run_on():
    chosen = {}
    queue = [Request("a", gpus=1), Request("b", gpus=1), Request("c", gpus=2)]
    assert admit(queue, TWO_WORKERS, placed=[], pending=[], chosen=chosen) == ["a", "b", "c"]
    assert chosen == {"a": "w1", "b": "w1", "c": "w2"}       # packed, so the 2-GPU run has a whole node
