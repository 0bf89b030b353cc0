"""The Docker executor against the real Docker Engine (no registry: the offline runtime image).

Skipped only when no Docker Engine can be reached, and then loudly; `.ci/run` starts dockerd."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from aiohttp import web

from autorl_tui.executors.base import ContainerLaunch, ExecutorError, LaunchSpec, Mount
from autorl_tui.executors.docker_logs import POSITIONS_FILE
from autorl_tui.executors.docker import LABEL_ATTEMPT, LABEL_HOME, LABEL_RUN, DockerExecutor
from tests.support.docker_engine import docker_client  # noqa: F401 (fixture)

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.docker


@pytest.fixture
def harness(tmp_path, docker_client):
    """A home, a workspace, a read-only model, a held-out file outside every mount."""
    home = tmp_path / "home"
    ws = tmp_path / "ws"
    model = tmp_path / "models" / "tiny"
    heldout = tmp_path / "heldout" / "test.jsonl"
    for d in (home, ws / "code", ws / "output", ws / "logs", ws / ".home", model, heldout.parent):
        d.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "tiny"}')
    os.chmod(model / "config.json", 0o644)
    heldout.write_text('{"id": 1, "answer": "secret"}\n')
    executor = DockerExecutor(home=home)
    yield {"home": home, "ws": ws, "model": model, "heldout": heldout, "executor": executor,
           "client": docker_client, "tmp": tmp_path}
    executor.reap(home, live=set())


def make_spec(h, name: str, program: str, *, deadline_s: float = 60, **kw) -> LaunchSpec:
    agent = h["ws"] / "code" / f"{name}.py"
    agent.write_text(textwrap.dedent(program))
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(h["ws"] / ".home"),
           "WORKSPACE": str(h["ws"]), "MODEL_PATH": str(h["ws"] / "models" / "tiny"), "PYTHONUNBUFFERED": "1",
           "LANG": "C.UTF-8"}
    env.update(kw.pop("env", {}))
    return LaunchSpec(run_id=f"r-{name}", attempt=kw.pop("attempt", 1), command=["python", str(agent)],
                      workspace=h["ws"], env=env, log_dir=h["tmp"] / "logs" / name,
                      deadline=time.time() + deadline_s,
                      mounts=[Mount(h["model"], "models/tiny", read_only=True)], **kw)


async def start_grading_server(sock: Path, token: str):
    received = []

    async def health(request):
        return web.json_response({"ok": True})

    async def submit(request):
        body = await request.json()
        received.append(body)
        return web.json_response({"submission_id": len(received), "score": 42.0, "baseline_score": 40.0})

    app = web.Application()
    app.router.add_get(f"/{token}/health", health)
    app.router.add_post(f"/{token}/submit", submit)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.UnixSite(runner, str(sock)).start()
    return runner, received


AGENT_E2E = """
    import json, os, urllib.request
    ws = os.environ["WORKSPACE"]
    os.makedirs(f"{ws}/output/v1", exist_ok=True)
    open(f"{ws}/output/v1/model.safetensors", "w").write("weights")
    print("model config:", open(os.environ["MODEL_PATH"] + "/config.json").read())
    try:
        open(os.environ["MODEL_PATH"] + "/hacked", "w").write("x")
        print("MODEL WRITABLE")
    except OSError as e:
        print("model write blocked:", e.strerror)
    try:
        print("HELDOUT READ:", open(%(heldout)r).read())
    except OSError as e:
        print("heldout blocked:", e.strerror)
    url = os.environ["GRADING_SERVER_URL"]
    print("health:", urllib.request.urlopen(url + "/health", timeout=10).read().decode())
    req = urllib.request.Request(url + "/submit", data=json.dumps({"model_path": "output/v1"}).encode(),
                                 headers={"Content-Type": "application/json"})
    print("submit:", urllib.request.urlopen(req, timeout=10).read().decode())
    import sys; print("to stderr", file=sys.stderr)
"""


async def test_end_to_end_agent_grading_through_socket_and_isolation(harness):
    h = harness
    sockdir = h["tmp"] / "grading"
    sockdir.mkdir(mode=0o700)
    runner, received = await start_grading_server(sockdir / "api.sock", "tok123")
    try:
        spec = make_spec(h, "e2e", AGENT_E2E % {"heldout": str(h["heldout"])},
                         container=ContainerLaunch(grading_socket=sockdir / "api.sock"),
                         env={"GRADING_SERVER_URL": "http://127.0.0.1:45678/tok123"}, cpus=1.0,
                         memory_bytes=512 << 20)
        handle = await h["executor"].start(spec)
        container = h["client"].containers.get(handle.ident()["container_id"])
        assert container.labels[LABEL_RUN] == "r-e2e" and container.labels[LABEL_ATTEMPT] == "1"
        assert container.labels[LABEL_HOME] == str(h["home"].resolve())
        host_cfg = container.attrs["HostConfig"]
        assert host_cfg["NetworkMode"] == "none" and host_cfg["Memory"] == 512 << 20
        assert host_cfg["NanoCpus"] == 10 ** 9 and host_cfg["MemorySwap"] == 512 << 20
        assert container.attrs["Config"]["User"] == ("65534:65534" if os.getuid() == 0 else f"{os.getuid()}:{os.getgid()}")
        code = await asyncio.wait_for(handle.wait(), 60)
    finally:
        await runner.cleanup()
    out = spec.stdout_path.read_text()
    assert code == 0, out + spec.stderr_path.read_text()
    assert received == [{"model_path": "output/v1"}]
    assert '"score": 42.0' in out and "health: {\"ok\": true}" in out
    assert "model write blocked: Read-only file system" in out and "MODEL WRITABLE" not in out
    assert "heldout blocked: No such file or directory" in out and "secret" not in out
    assert (h["ws"] / "output" / "v1" / "model.safetensors").read_text() == "weights"
    assert not (h["model"] / "hacked").exists()
    assert spec.stderr_path.read_text() == "to stderr\n"
    record = json.loads(spec.exit_path.read_text())
    assert record["exit_code"] == 0 and not record["oom_killed"]
    assert not h["client"].containers.list(all=True, ignore_removed=True, filters={"label": f"{LABEL_RUN}=r-e2e"})   # removed


AGENT_NET = """
    import socket
    for name, addr in (("loopback", ("127.0.0.1", %(port)d)), ("public", ("1.1.1.1", 53))):
        s = socket.socket()
        s.settimeout(3)
        try:
            s.connect(addr)
            print(name, "REACHED")
        except OSError as e:
            print(name, "unreachable:", type(e).__name__)
"""


async def test_network_none_really_has_no_network(harness):
    h = harness
    hits = []

    async def on_conn(reader, writer):
        hits.append(1)
        writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        spec = make_spec(h, "net", AGENT_NET % {"port": port})
        assert await asyncio.wait_for((await h["executor"].start(spec)).wait(), 60) == 0
        out = spec.stdout_path.read_text()
        assert "loopback unreachable" in out and "public unreachable" in out and "REACHED" not in out
        assert hits == []
        # bridge (for LLM APIs) still cannot reach the host's loopback services (the grading API)
        spec = make_spec(h, "netbridge", AGENT_NET % {"port": port}, network="bridge")
        assert await asyncio.wait_for((await h["executor"].start(spec)).wait(), 60) == 0
        assert "loopback unreachable" in spec.stdout_path.read_text() and hits == []
        # the probe itself works: with host networking the same loopback server is reached
        spec = make_spec(h, "nethost", AGENT_NET % {"port": port}, network="host")
        assert await asyncio.wait_for((await h["executor"].start(spec)).wait(), 60) == 0
        assert "loopback REACHED" in spec.stdout_path.read_text() and hits == [1]
    finally:
        server.close()


async def test_container_past_its_deadline_is_killed_by_its_own_guard(harness):
    h = harness
    spec = make_spec(h, "deadline", """
        import subprocess, time
        subprocess.Popen(["setsid", "sleep", "300"])
        print("sleeping", flush=True)
        time.sleep(300)
    """, deadline_s=2.0)
    t0 = time.time()
    handle = await h["executor"].start(spec)
    code = await asyncio.wait_for(handle.wait(), 30)      # the engine never calls kill here
    assert code == 137 and time.time() - t0 < 10
    info = json.loads(spec.exit_path.read_text())
    assert info["deadline_reached"] is True and info["reason"] == "deadline"   # ended by its budget
    assert "deadline reached" in spec.stderr_path.read_text()
    # what the engine reads (engine/agent_watch.py): the guard won the race against the engine's own
    # deadline kill, so the engine finds it dead and kills nothing; its end is still the budget's
    assert not handle.is_alive() and handle.exit_info()["reason"] == "deadline"


async def test_extend_deadline_pause_and_kill(harness):
    h = harness
    spec = make_spec(h, "killme", "import time\nprint('up', flush=True)\ntime.sleep(300)\n", deadline_s=1.5)
    handle = await h["executor"].start(spec)
    await handle.extend_deadline(time.time() + 120)      # the guard re-reads it: no death at 1.5 s
    await asyncio.sleep(3)
    assert handle.is_alive() and handle.pids()
    await handle.pause()
    (listed,) = [c for c in h["executor"].containers() if c["run_id"] == "r-killme"]
    assert listed["status"] == "paused" and listed["attempt"] == 1
    await handle.kill("budget")                          # a paused container can be killed too
    assert await asyncio.wait_for(handle.wait(), 30) == -signal.SIGKILL
    assert not handle.is_alive()
    assert json.loads(spec.exit_path.read_text())["killed"] == "budget"


async def test_memory_limit_is_enforced(harness):
    h = harness
    spec = make_spec(h, "oom", "blob = bytearray(400 * 1024 * 1024)\nprint('ALLOCATED')\n", memory_bytes=64 << 20)
    code = await asyncio.wait_for((await h["executor"].start(spec)).wait(), 60)
    assert code == 137
    assert json.loads(spec.exit_path.read_text())["oom_killed"] is True
    assert "ALLOCATED" not in spec.stdout_path.read_text()


CRASHING_ENGINE = """
import asyncio, sys, time, pickle
sys.path.insert(0, {repo!r})
from autorl_tui.executors.docker import DockerExecutor
spec = pickle.load(open({spec!r}, "rb"))
async def main():
    handle = await DockerExecutor(home={home!r}).start(spec)
    open({ident!r}, "w").write(handle.ident()["container_id"])
    await asyncio.sleep(3600)
asyncio.run(main())
"""


async def test_readoption_resumes_logs_without_duplication_after_engine_kill(harness):
    import pickle

    h = harness
    n = 300
    spec = make_spec(h, "adopt", f"""
        import sys, time
        for i in range({n}):
            print(f"line {{i}}", flush=True)
            if i % 10 == 0:
                print(f"err {{i}}", file=sys.stderr, flush=True)
            time.sleep(0.03)
    """)
    spec_file, ident_file = h["tmp"] / "spec.pkl", h["tmp"] / "ident"
    spec_file.write_bytes(pickle.dumps(spec))
    engine = subprocess.Popen([sys.executable, "-c", CRASHING_ENGINE.format(
        repo=str(REPO), spec=str(spec_file), home=str(h["home"]), ident=str(ident_file))])
    positions = Path(spec.log_dir) / POSITIONS_FILE

    def saved_a_stdout_position() -> bool:
        try:
            return (json.loads(positions.read_text()).get("stdout") or {}).get("ns", 0) > 0
        except (OSError, ValueError):
            return False

    try:
        # Kill the engine only once it has copied some output AND recorded where it got to (at load
        # it can lag behind the agent); the agent prints for several seconds, so this comes first.
        deadline = time.monotonic() + 120
        while not (ident_file.exists() and spec.stdout_path.exists() and spec.stdout_path.stat().st_size > 200
                   and saved_a_stdout_position()):
            assert time.monotonic() < deadline, "the engine never recorded a log position"
            await asyncio.sleep(0.05)
        engine.send_signal(signal.SIGKILL)     # the engine dies mid-stream
        engine.wait()
    finally:
        if engine.poll() is None:
            engine.kill()
    copied_before = spec.stdout_path.read_text().count("\n")
    assert 0 < copied_before < n, "the engine must die while the agent is still printing"
    handle = await DockerExecutor(home=h["home"]).adopt({"container_id": ident_file.read_text(), "number": 1}, spec)
    assert handle is not None
    assert await asyncio.wait_for(handle.wait(), 60) == 0
    assert handle.pumps[0].skipped >= 1        # Docker re-sent what was copied: skipped, not duplicated
    print("truncated on resume:", handle.pumps[0].truncated, "bytes")
    assert spec.stdout_path.read_text().splitlines() == [f"line {i}" for i in range(n)]
    assert spec.stderr_path.read_text().splitlines() == [f"err {i}" for i in range(0, n, 10)]
    # adopting again after the end: the recorded exit, no container any more
    again = await DockerExecutor(home=h["home"]).adopt({"container_id": ident_file.read_text(), "number": 1}, spec)
    assert again is not None and not again.is_alive() and await again.wait() == 0


async def test_reap_removes_orphans_of_this_home_only(harness):
    h = harness
    sleeper = "import time\ntime.sleep(300)\n"
    keep = await h["executor"].start(make_spec(h, "keep", sleeper))
    orphan = await h["executor"].start(make_spec(h, "orphan", sleeper))
    other_home = h["tmp"] / "other-home"
    other_home.mkdir()
    other = await DockerExecutor(home=other_home).start(make_spec(h, "other", sleeper))
    try:
        removed = h["executor"].reap(live={keep.ident()["container_id"][:12]})
        assert removed == [orphan.ident()["container_id"]]
        assert keep.is_alive() and other.is_alive() and not orphan.is_alive()
        assert await DockerExecutor(home=h["home"]).adopt({"container_id": orphan.ident()["container_id"]},
                                                          make_spec(h, "orphan", sleeper)) is None
    finally:
        for handle in (keep, other):
            await handle.kill("test over")
            await handle.wait()


async def test_gpus_without_nvidia_runtime_fail_clearly_and_missing_image_too(harness):
    h = harness
    if "nvidia" in (h["client"].info().get("Runtimes") or {}):
        pytest.skip("this engine has the NVIDIA runtime")
    with pytest.raises(ExecutorError, match="NVIDIA Container Toolkit"):
        await h["executor"].start(make_spec(h, "gpu", "print(1)", gpus=["0"]))
    with pytest.raises(ExecutorError, match="not in the local Docker Engine"):
        await h["executor"].start(make_spec(h, "img", "print(1)", container=ContainerLaunch(image="nosuch/image:1")))


async def test_unreadable_mount_is_refused_with_the_fix(harness):
    h = harness
    if os.getuid() != 0:
        pytest.skip("the container runs as the harness's own user: every mount is readable")
    secret = h["tmp"] / "private-data"
    secret.mkdir(mode=0o700)
    spec = make_spec(h, "perm", "print(1)")
    spec.mounts.append(Mount(secret, "data", read_only=True))
    with pytest.raises(ExecutorError, match=r"not readable by the container user .*chmod -R o\+rX"):
        await h["executor"].start(spec)
    spec.mounts[-1] = Mount(h["tmp"] / "missing", "data")
    with pytest.raises(ExecutorError, match="does not exist"):
        await h["executor"].start(spec)


async def test_a_named_image_gets_no_host_runtime(harness):
    from autorl_tui.executors.images import ensure_runtime_image

    h = harness
    # the empty runtime image named as a user image: nothing of the host is mounted, so no python3
    image = ensure_runtime_image(h["client"])
    spec = make_spec(h, "custom", "print(1)", container=ContainerLaunch(image=image))
    handle = await h["executor"].start(spec)
    container = h["client"].containers.get(handle.ident()["container_id"])
    targets = {m["Destination"] for m in container.attrs["Mounts"]}
    assert not targets & {"/usr", "/etc", sys.prefix}
    assert await asyncio.wait_for(handle.wait(), 30) == 127
    assert "no python3 on its PATH" in json.loads(spec.exit_path.read_text())["error"]


def test_available_reports_the_engine(harness, monkeypatch):
    ok, detail = harness["executor"].available()
    assert ok and "Docker Engine" in detail
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    ok, detail = DockerExecutor(home="/x").available()
    assert not ok and "cannot reach the Docker Engine" in detail and "DOCKER_HOST" in detail
