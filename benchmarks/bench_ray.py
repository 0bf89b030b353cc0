"""The Ray executor against the local one on this machine: start-to-exit latency of a trivial
agent (`true`, unsandboxed in both so that the figure is the executor path itself) and the rate
at which the Ray path places runs (N one-GPU runs started at once on a local cluster of a head and
two workers declaring fake GPUs; placed = the actor holds its GPU and the shim started the agent).
Also what the engine's loop spends on one admission decision: it reads the background view of the
nodes (`ray_view.ClusterView`) instead of calling `ray.nodes()`, whose cost is shown beside it.
With a Docker Engine: the same latency for a container (`true` in the offline runtime image), the
docker executor on this host against the Ray path that runs it in a container of the node
(`cluster: {containers: true}`, executors/docker_shim.py).
Ray's files stay under a temporary folder; the cluster is shut down at the end."""

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autorl_tui.executors.base import ClusterLaunch, LaunchSpec, SandboxLaunch  # noqa: E402
from autorl_tui.executors.local import LocalExecutor  # noqa: E402

N = 6
PLACE = 8


def spec(tmp: Path, name: str, address: str | None = None, containers: bool = False) -> LaunchSpec:
    env = {"PATH": "/usr/bin:/bin"}
    placement = {"gpus": 0 if containers else 1, "address": address, "containers": containers} if address else {}
    return LaunchSpec(run_id=name, attempt=1, command=["true"], workspace=tmp / "ws", env=env,
                      log_dir=tmp / "home" / "runs" / name, deadline=time.time() + 120,
                      sandbox=SandboxLaunch(isolate=False), cluster=ClusterLaunch(placement=placement),
                      labels={"autorl.home": str(tmp / "home")} if containers else {})


async def latency(executor, tmp: Path, kind: str, address: str | None = None, containers: bool = False) -> list[float]:
    out = []
    for i in range(N):
        s = spec(tmp, f"{kind}-{i}", address, containers)
        t0 = time.perf_counter()
        code = await (await executor.start(s)).wait()
        out.append(time.perf_counter() - t0)
        assert code == 0, (s.stdout_path.read_text(), s.stderr_path.read_text())
    return out


def admission(executor, ray, n: int = 200) -> tuple[list[float], list[float]]:
    from autorl_tui.executors.ray_placement import Request

    queue = [Request(run_id=f"q{i}", gpus=1) for i in range(6)]
    while executor.view.alive() is None:       # the first fetch, in the background
        time.sleep(0.05)
    admit_ms, nodes_ms = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        executor.admit(queue, [])
        admit_ms.append((time.perf_counter() - t0) * 1000)
    for _ in range(n // 10):
        t0 = time.perf_counter()
        ray.nodes()
        nodes_ms.append((time.perf_counter() - t0) * 1000)
    return admit_ms, nodes_ms


async def containers(executor, tmp: Path, address: str) -> None:
    """Docker executor here vs docker executor inside a run's actor (fake GPUs: the runs ask none)."""
    from autorl_tui.executors.docker import DockerExecutor
    from autorl_tui.executors.images import ensure_runtime_image

    docker = DockerExecutor(home=tmp / "home")
    ok, why = docker.available()
    if not ok:
        print(f"ray docker figures skipped: {why}")
        return
    await asyncio.to_thread(ensure_runtime_image, docker.client)      # built once, outside the timings
    try:
        here = await latency(docker, tmp, "docker")
        there = await latency(executor, tmp, "raydocker", address, containers=True)
    finally:
        docker.reap(live=set())
    print(f"docker_start_to_exit_median: {statistics.median(here) * 1000:.0f} ms (docker executor, this host)")
    print(f"ray_docker_start_to_exit_median: {statistics.median(there) * 1000:.0f} ms (a container in a Ray actor)")
    print(f"ray_docker_overhead_per_run: {(statistics.median(there) - statistics.median(here)) * 1000:.0f} ms")


async def main() -> int:
    try:
        import ray
        from ray.cluster_utils import Cluster
    except ImportError:
        print("ray benchmark skipped: the ray extra is not installed")
        return 0
    from autorl_tui.executors.ray import RayExecutor

    with tempfile.TemporaryDirectory(prefix="bray-", dir="/tmp") as tmp:
        tmp = Path(tmp)
        (tmp / "ws").mkdir()
        (tmp / "home").mkdir()
        os.environ["RAY_TMPDIR"] = str(tmp)
        t0 = time.perf_counter()
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0,
                                                                "include_dashboard": False, "temp_dir": str(tmp / "ray")})
        try:
            for _ in range(2):
                cluster.add_node(num_cpus=PLACE, num_gpus=PLACE // 2)
            cluster.wait_for_nodes()
            print(f"ray_cluster_start: {time.perf_counter() - t0:.1f} s (head + 2 workers)")
            local = await latency(LocalExecutor(), tmp, "local")
            executor = RayExecutor(home=tmp / "home", address=cluster.address)
            remote = await latency(executor, tmp, "ray", cluster.address)
            t0 = time.perf_counter()
            handles = await asyncio.gather(*(executor.start(spec(tmp, f"place-{i}", cluster.address))
                                             for i in range(PLACE)))
            placed_s = time.perf_counter() - t0
            await asyncio.gather(*(h.wait() for h in handles))
            print(f"local_start_to_exit_median: {statistics.median(local) * 1000:.0f} ms")
            print(f"ray_start_to_exit_median: {statistics.median(remote) * 1000:.0f} ms")
            print(f"ray_overhead_per_run: {(statistics.median(remote) - statistics.median(local)) * 1000:.0f} ms")
            print(f"ray_runs_placed_per_s: {PLACE / placed_s:.2f} runs/s ({PLACE} one-GPU runs on 2 nodes)")
            if not ray.is_initialized():    # the executor no longer connects this process: ray.nodes() needs it
                ray.init(address=cluster.address, logging_level="ERROR")
            admit_ms, nodes_ms = admission(executor, ray)
            print(f"ray_admit_on_loop_median: {statistics.median(admit_ms):.3f} ms (max {max(admit_ms):.3f} ms, "
                  f"{len(admit_ms)} decisions, 6 queued runs)")
            print(f"ray_nodes_call_median: {statistics.median(nodes_ms):.1f} ms (max {max(nodes_ms):.1f} ms: "
                  f"what each decision would wait for without the view)")
            await containers(executor, tmp, cluster.address)
        finally:
            ray.shutdown()
            cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
