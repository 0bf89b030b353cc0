"""Start-up cost of a local agent's sandbox, per run: from `LocalExecutor.start` to the end of an
agent that does nothing (`/bin/true`), side by side in one process, for each `network:`:
- `host`: the sandbox as it was before it had a network of its own (bwrap, leased uid, setpriv;
  plus the user-namespace seccomp filter, which costs microseconds);
- `none`: plus its own network namespace, the shim's Unix-socket forwarder to the grading API
  and the in-sandbox loopback forwarder (a system python3 start);
- `bridge`: plus slirp4netns attached before the agent's command runs.
Needs root and bubblewrap (slirp4netns for `bridge`); prints `skipped` otherwise."""

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.local_agent import HttpServer, run_local_agent  # noqa: E402

N = int(os.environ.get("BENCH_AGENT_SANDBOX_N", "10"))


def main() -> None:
    if os.geteuid() != 0 or shutil.which("bwrap") is None:
        print("agent_sandbox: skipped (needs root and bubblewrap)")
        return
    print(f"load_average_1min: {os.getloadavg()[0]:.1f} (on {os.cpu_count()} CPUs)")
    api = HttpServer(body="api")
    base = Path(tempfile.mkdtemp(prefix="autorl-bench-", dir="/tmp"))
    os.chmod(base, 0o711)
    networks = ["host", "none"] + (["bridge"] if shutil.which("slirp4netns") else [])
    times: dict[str, list[float]] = {n: [] for n in networks}
    try:
        for i in range(N + 1):            # interleaved, so load hits every mode alike; round 0 warms up
            for network in networks:
                root = base / f"{network}-{i}"
                root.mkdir()
                t0 = time.perf_counter()
                info, _, err = run_local_agent(root, ["/bin/true"], network=network,
                                               env={"GRADING_SERVER_URL": api.url + "/token"})
                dt = time.perf_counter() - t0
                if info["exit_code"] != 0:
                    raise SystemExit(f"agent failed under network {network}: {info} {err}")
                if i:
                    times[network].append(dt)
                shutil.rmtree(root, ignore_errors=True)
    finally:
        api.close()
        shutil.rmtree(base, ignore_errors=True)
    for network in networks:
        t = times[network]
        print(f"agent_sandbox_{network}_start_to_exit: median {1000 * statistics.median(t):.0f} ms, "
              f"max {1000 * max(t):.0f} ms ({len(t)} runs)")
    base_ms = statistics.median(times["host"])
    for network in networks[1:]:
        print(f"agent_sandbox_{network}_added: {1000 * (statistics.median(times[network]) - base_ms):+.0f} ms per run "
              f"(vs host network, the sandbox before its own network namespace)")


if __name__ == "__main__":
    main()
