"""A real local Ray cluster for the functional tests of `executor: ray`: a head (one CPU, no GPUs)
and two worker nodes declaring GPUS_PER_NODE (fake) GPUs each, started once per test module,
with Ray's token authentication on (as the engine requires: executors/ray_auth.py), with the
session's token (RAY_AUTH_MODE, RAY_AUTH_TOKEN: tests/conftest.py sets them before ray is
imported), so the engines the tests start carry it. Ray's files stay under a temporary folder; the cluster is shut down at the end.
On a loaded machine Ray may give up on a node it starts ("node timed out during startup": its own
fixed 30 s for the raylet to register): that node's processes are ended and it is started again."""

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import psutil
import pytest

from tests.support.harness import install_model, make_reachable_home

GPUS_PER_NODE = 2
NODE_START_TRIES = 3


def start_node(cluster, **node_args):
    """`cluster.add_node(**node_args)`, tried again (NODE_START_TRIES in all) when Ray says the node
    timed out during startup; the processes the failed try left (its raylet and agents, children
    of this process) are ended first, so that they never join the cluster later."""
    me = psutil.Process()
    for tries in range(1, NODE_START_TRIES + 1):
        before = {c.pid for c in me.children()}
        try:
            return cluster.add_node(**node_args)
        except Exception as exc:
            if "timed out during startup" not in str(exc) or tries == NODE_START_TRIES:
                raise
            left = [c for c in me.children() if c.pid not in before]
            for proc in left:
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()
            psutil.wait_procs(left, timeout=60)


@pytest.fixture(scope="module")
def ray_cluster():
    # Short (Ray's Unix socket paths have a length limit) and temporary: nothing goes to /tmp/ray.
    tmp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
    saved = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = str(tmp)
    assert os.environ.get("RAY_AUTH_MODE") == "token", "tests/conftest.py turns Ray's token authentication on"
    from ray.cluster_utils import Cluster

    cluster = Cluster()
    try:
        start_node(cluster, num_cpus=1, num_gpus=0, include_dashboard=False, temp_dir=str(tmp / "ray"),
                   # A removed node is declared dead in seconds rather than the default ~30 s.
                   _system_config={"health_check_initial_delay_ms": 0, "health_check_period_ms": 1000,
                                   "health_check_failure_threshold": 3})
        workers = [start_node(cluster, num_cpus=3, num_gpus=GPUS_PER_NODE) for _ in range(2)]
        cluster.wait_for_nodes(timeout=300)
        yield cluster, workers, tmp
    finally:
        import ray

        ray.shutdown()
        cluster.shutdown()
        if saved is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = saved
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def ray_home(tiny_model_dir):
    home = make_reachable_home("autorl-ray-")
    home.mkdir(parents=True)
    install_model(tiny_model_dir, home)
    yield home
    shutil.rmtree(home.parent, ignore_errors=True)


@contextlib.asynccontextmanager
async def retrying_engine(home: Path, tasks_dir: Path, max_attempts: int = 2):
    """A started engine on `home` whose infra retries come after 1 s (a lost node's run is retried
    at once), stopped at the end."""
    from autorl_tui.engine.engine import Engine
    from autorl_tui.engine.scheduling import RetryPolicy
    from autorl_tui.home import Home
    from tests.support.harness import TEST_AGENTS

    engine = Engine(Home.open(str(home)), tasks_dirs=[tasks_dir], agents_dirs=[TEST_AGENTS])
    engine.retry_policy = RetryPolicy(max_attempts=max_attempts, base_s=1.0)
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


def one_run_plan(name: str, task: str, agent: str, address: str, *, gpus: int, budget: str = "600s",
                 containers: bool = False):
    """A plan of one `executor: ray` run (seed 0, the tiny model) on the cluster at `address`."""
    from autorl_tui.catalog.plans import parse_plan

    cluster = f"{{address: '{address}'" + (", containers: true}" if containers else "}")
    return parse_plan(f"name: {name}\ntasks: [{task}]\nagents: [{agent}]\nmodels: [tiny]\nseeds: [0]\n"
                      f"budget: {budget}\nexecutor: ray\ngpus_per_run: {gpus}\ncluster: {cluster}\n")
