"""Start-to-exit latency of a trivial agent in a container (offline runtime image, network none,
the grading socket forwarder on), through DockerExecutor.start() + wait(). Skips (exit 0 with a
note) when no Docker Engine is reachable. Also the rate at which a flooding agent's stdout is
copied into stdout.log (start to last line copied)."""

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autorl_tui.executors.base import ContainerLaunch, LaunchSpec  # noqa: E402
from autorl_tui.executors.docker import DockerExecutor  # noqa: E402

N = 8


async def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        executor = DockerExecutor(home=tmp / "home")
        ok, detail = executor.available()
        if not ok:
            print(f"docker benchmark skipped: {detail}")
            return 0
        (tmp / "ws").mkdir()
        (tmp / "grading").mkdir()
        env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "GRADING_SERVER_URL": "http://127.0.0.1:1/t"}
        times = {"sh": [], "python": []}
        for i in range(N):
            for kind, command in (("sh", "true"), ("python", ["python", "-c", "print('ok')"])):
                spec = LaunchSpec(run_id=f"bench-{kind}-{i}", attempt=1, command=command, workspace=tmp / "ws",
                                  env=env, log_dir=tmp / "logs" / f"{kind}{i}", deadline=time.time() + 60,
                                  container=ContainerLaunch(grading_socket=tmp / "grading" / "api.sock"))
                t0 = time.perf_counter()
                handle = await executor.start(spec)
                code = await handle.wait()
                times[kind].append(time.perf_counter() - t0)
                assert code == 0, (spec.stdout_path.read_text(), spec.stderr_path.read_text())
        # log copy throughput: an agent flooding stdout, copied to stdout.log until the end
        lines = 50_000
        spec = LaunchSpec(run_id="bench-flood", attempt=1, command=["python", "-c", f"for i in range({lines}): print(i)"],
                          workspace=tmp / "ws", env=env, log_dir=tmp / "logs" / "flood", deadline=time.time() + 120)
        t0 = time.perf_counter()
        assert await (await executor.start(spec)).wait() == 0
        elapsed = time.perf_counter() - t0
        assert spec.stdout_path.read_text().count("\n") == lines
        print(f"docker_log_copy_rate: {lines / elapsed:.0f} lines/s")
        executor.reap()
        for kind, values in times.items():
            # the first run includes the runtime image import when it is not cached yet
            print(f"docker_{kind}_start_to_exit_median: {statistics.median(values) * 1000:.0f} ms")
            print(f"docker_{kind}_start_to_exit_p90: {sorted(values)[int(0.9 * (len(values) - 1))] * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
