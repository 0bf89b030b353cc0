"""The sandbox against hostile programs: each is contained, reported with its reason, and the
sandbox keeps working afterwards. Real processes, namespaces and rlimits (root is needed for the
namespaces and the uid switch; without it those tests are skipped and the fallback is tested)."""

import os
import socket
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from autorl_tui.grading.sandbox import Sandbox, SandboxLimits

REPO = Path(__file__).resolve().parents[2]
# The sandbox covers these with private tmpfs mounts, so files there are invisible, not denied.
_PRIVATE_IN_SANDBOX = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


def _harness_dir() -> Path:
    """A folder the sandbox sees (not under its private mounts) but must not write or read into:
    the repo, unless the clone itself lies under /tmp (as CI's may); then /run."""
    for candidate in (REPO, Path("/run")):
        if not any(str(candidate) == p or str(candidate).startswith(p + "/") for p in _PRIVATE_IN_SANDBOX):
            return candidate
    raise RuntimeError("no visible harness folder")
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and the uid switch need root")


@pytest.fixture(scope="module", params=["forkserver", "oneshot"])
def sandbox(request):
    """Both execution modes face every hostile program: the fork server (default when root) and
    one interpreter per program (the fallback)."""
    sb = Sandbox(SandboxLimits(wall_s=5, cpu_s=3, memory_mb=512, nproc=16), workers=2,
                 forkserver=request.param == "forkserver")
    if request.param == "forkserver" and not sb.use_forkserver:
        sb.close()
        pytest.skip(f"fork server unavailable here: {sb.isolation.get('mode')}")
    yield sb
    sb.close()


def none_left(uids, within_s: float = 10) -> bool:
    """No process of the sandbox's uid range, once the killed ones are gone (a killed process
    lingers until its parent reaps it, longer on a loaded machine)."""
    span = set(range(min(uids), max(uids) + 1))
    end = time.monotonic() + within_s
    while processes_of(span):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def processes_of(uids) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            line = next(l for l in status.splitlines() if l.startswith("Uid:"))
            if int(line.split()[1]) in uids:
                found.append(int(entry.name))
    return found


def assert_survives(sb):
    out = sb.run("print(6 * 7)")
    assert out.passed and out.stdout.strip() == "42", out


def test_passing_program_and_structured_failures(sandbox):
    ok = sandbox.run("x = 1\nassert x == 1\nprint('done')")
    assert ok.passed and ok.reason is None and ok.stdout == "done\n"
    bad = sandbox.run("def f():\n    return 1\n\nassert f() == 2, 'f is wrong'\n")
    assert not bad.passed and bad.reason == "runtime_error" and bad.error_type == "AssertionError"
    assert bad.error == "AssertionError: f is wrong" and bad.lineno == 4 and bad.line.startswith("assert f()")
    syn = sandbox.run("def f(:\n    pass\n")
    assert syn.reason == "syntax_error" and syn.error.startswith("SyntaxError")


def test_exiting_early_with_status_zero_does_not_pass(sandbox):
    for program in ("import sys\nsys.exit(0)\nassert False", "import os\nos._exit(0)\nassert False"):
        out = sandbox.run(program)
        assert not out.passed and out.reason == "exited", out


def test_infinite_loop_is_stopped_by_cpu_or_wall_limit(sandbox):
    t0 = time.monotonic()
    out = sandbox.run("while True:\n    pass\n", wall_s=3, cpu_s=1)
    assert not out.passed and out.reason in ("cpu_time", "timeout"), out
    assert time.monotonic() - t0 < 4.5
    sleeper = sandbox.run("import time\ntime.sleep(60)\n", wall_s=1)   # no CPU used: the wall clock stops it
    assert sleeper.reason == "timeout" and sleeper.duration_s < 3
    assert_survives(sandbox)


def test_ten_gigabyte_allocation_fails_with_memory_reason(sandbox):
    out = sandbox.run("blob = bytearray(10 * 1024 ** 3)\n")
    assert not out.passed and out.reason == "memory" and "512 MB" in out.error
    assert_survives(sandbox)


@root_only
def test_fork_bomb_is_contained_and_leaves_no_process(sandbox):
    uids = {int(x) for x in sandbox.isolation["uid"].split()[-1].split("..")}
    plain = sandbox.run("import os\nwhile True:\n    os.fork()\n", wall_s=5)
    assert not plain.passed and plain.reason == "runtime_error" and plain.error_type == "BlockingIOError", plain
    stubborn = sandbox.run("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
                           wall_s=2, cpu_s=10)
    assert not stubborn.passed and stubborn.reason in ("timeout", "cpu_time"), stubborn
    assert none_left(uids)
    assert_survives(sandbox)


@root_only
def test_setsid_escapee_dies_with_the_sandbox(sandbox):
    uids = {int(x) for x in sandbox.isolation["uid"].split()[-1].split("..")}
    program = ("import os, time\n"
               "if os.fork() == 0:\n"
               "    os.setsid()\n"
               "    time.sleep(120)\n"
               "print('parent done')\n")
    out = sandbox.run(program)
    assert out.passed, out
    assert none_left(uids)


@root_only
def test_writing_outside_the_temp_dir_is_contained(sandbox):
    name = f"autorl-escape-{uuid.uuid4().hex}"
    program = (f"open('/tmp/{name}', 'w').write('x')          # lands in the sandbox's private /tmp\n"
               f"open('/var/tmp/{name}', 'w').write('x')\n"
               f"open({str(_harness_dir() / name)!r}, 'w').write('x')   # the harness's files: permission denied\n")
    out = sandbox.run(program)
    assert not out.passed and out.reason == "runtime_error" and out.error_type == "PermissionError", out
    assert not Path(f"/tmp/{name}").exists() and not Path(f"/var/tmp/{name}").exists()
    assert not (_harness_dir() / name).exists()
    assert sandbox.run("import os\nprint(os.getcwd())").stdout.strip() == "/tmp/sandbox"


@root_only
def test_reading_a_held_out_file_is_denied(sandbox):
    folder = Path(tempfile.mkdtemp(prefix=".sandbox-heldout-", dir=_harness_dir()))   # visible, not readable
    try:
        os.chmod(folder, 0o755)
        secret = folder / "test.jsonl"
        secret.write_text('{"id": "t1", "answer": "42"}\n')
        os.chmod(secret, 0o600)
        out = sandbox.run(f"print(open({str(secret)!r}).read())\n")
        assert not out.passed and out.error_type == "PermissionError", out
        assert "42" not in out.stdout
    finally:
        secret.unlink(missing_ok=True)
        folder.rmdir()


@root_only
def test_no_network_even_to_loopback(sandbox):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    port = server.getsockname()[1]
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):   # reachable from the host
            pass
        out = sandbox.run(f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\n")
        assert not out.passed and out.reason == "runtime_error" and out.error_type == "OSError", out
        assert "unreachable" in out.error.lower()
        assert sandbox.isolation["network"].startswith("none")
    finally:
        server.close()


LISTENER = """
import socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\\0{name}")
s.listen(1)
s.settimeout(4)
try:
    c, _ = s.accept()
    print("LISTENER-GOT", c.recv(16).decode())
except socket.timeout:
    print("LISTENER-ALONE")
"""
CALLER = """
import socket, time
end = time.time() + 3
while True:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect("\\0{name}")
        c.sendall(b"secret")
        print("CALLER-TALKED")
        break
    except OSError:
        if time.time() > end:
            print("CALLER-ALONE")
            break
        time.sleep(0.05)
"""


def _pair(sb) -> str:
    """Two programs graded at the same time: one listens on an abstract unix socket, one calls it."""
    from concurrent.futures import ThreadPoolExecutor

    name = f"autorl-pair-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(2) as pool:
        listener = pool.submit(sb.run, LISTENER.format(name=name), wall_s=8)
        caller = pool.submit(sb.run, CALLER.format(name=name), wall_s=8)
        return listener.result().stdout + caller.result().stdout


@root_only
def test_two_programs_graded_at_once_cannot_talk(sandbox):
    unisolated = Sandbox(SandboxLimits(wall_s=8, cpu_s=5), workers=2, isolate=False)
    try:
        assert "CALLER-TALKED" in _pair(unisolated)   # the channel works where programs share a namespace
    finally:
        unisolated.close()
    out = _pair(sandbox)
    assert "LISTENER-ALONE" in out and "CALLER-ALONE" in out, out
    assert "per program" in sandbox.isolation["network"]


def test_output_flood_is_truncated_not_buffered(sandbox):
    out = sandbox.run("import sys\nfor _ in range(2000):\n    sys.stdout.write('x' * 1000)\n", output_bytes=10_000)
    assert out.passed and out.output_truncated and len(out.stdout) == 10_000
    exact = sandbox.run("import sys\nsys.stdout.write('y' * 10_000)\n", output_bytes=10_000)
    assert exact.passed and not exact.output_truncated and len(exact.stdout) == 10_000


def test_big_file_write_hits_the_file_size_limit(sandbox):
    out = sandbox.run("open('big.bin', 'wb').write(b'0' * (40 * 1024 * 1024))\n", file_size_mb=1)
    assert not out.passed and out.reason in ("killed", "runtime_error"), out


def test_environment_is_minimal(sandbox):
    os.environ["AUTORL_TEST_SECRET"] = "hunter2"
    try:
        out = sandbox.run("import os\nprint(sorted(os.environ))")
    finally:
        del os.environ["AUTORL_TEST_SECRET"]
    assert "AUTORL_TEST_SECRET" not in out.stdout and "PATH" in out.stdout


def test_run_many_keeps_order(sandbox):
    outs = sandbox.run_many([f"assert {i} % 2 == 0" for i in range(6)])
    assert [o.passed for o in outs] == [True, False, True, False, True, False]


def test_fallback_without_isolation_still_limits_and_says_why():
    with Sandbox(SandboxLimits(wall_s=3, cpu_s=2, memory_mb=512), isolate=False, workers=1) as sb:
        assert sb.isolation["network"].startswith("host network")
        assert "isolate=False" in sb.isolation["pid_namespace"]
        assert sb.run("blob = bytearray(10 * 1024 ** 3)").reason == "memory"
        assert sb.run("while True:\n    pass\n", cpu_s=1).reason in ("cpu_time", "timeout")
        assert sb.run("print('ok')").passed


def test_a_closed_sandbox_refuses_to_run():
    sb = Sandbox(SandboxLimits(wall_s=3), workers=1)
    assert sb.run("pass").passed
    sb.close()
    with pytest.raises(RuntimeError, match="closed"):
        sb.run("pass")


@root_only
def test_nothing_leaks_from_one_program_to_the_next(sandbox):
    first = sandbox.run("open('/tmp/sandbox/left', 'w').write('x')\nopen('/dev/shm/left', 'w').write('x')\n"
                        "open('/tmp/left', 'w').write('x')\n")
    assert first.passed, first
    for _ in range(sandbox.workers):   # whichever worker runs it
        second = sandbox.run("import os\nassert not any(os.path.exists(p) for p in "
                             "('/tmp/sandbox/left', '/dev/shm/left', '/tmp/left')), 'leaked'\n")
        assert second.passed, second


@root_only
def test_setuid_binaries_cannot_raise_privileges(sandbox):
    out = sandbox.run("import subprocess\nprint(open('/proc/self/status').read())\n")
    assert "NoNewPrivs:\t1" in out.stdout


@root_only
def test_a_dead_fork_server_is_replaced():
    sb = Sandbox(SandboxLimits(wall_s=3), workers=1)
    try:
        if not sb.use_forkserver:
            pytest.skip("fork server unavailable")
        server = next(iter(sb._forkservers.values()))
        server.proc.kill()
        server.proc.wait()
        assert sb.run("print('again')").stdout == "again\n"
    finally:
        sb.close()


def test_hash_seed_is_fixed_so_results_are_reproducible(sandbox):
    program = "print(list({'apple', 'banana', 'cherry', 'date', 'elder', 'fig'}), hash('abc'))"
    outs = {sandbox.run(program).stdout for _ in range(3)}
    assert len(outs) == 1
    assert sandbox.run("import sys\nprint(sys.path)").stdout.count("grading") == 0


def test_channel_reaches_the_program_as_fd_4_and_ends_with_it(sandbox):
    import threading

    ours, theirs = socket.socketpair()
    box = {}
    program = ("import os\nmsg = os.read(4, 100)\nos.write(4, msg.upper())\n"
               "print('stdout is not the channel')\n")
    runner = threading.Thread(target=lambda: box.update(out=sandbox.run(program, channel=theirs)))
    runner.start()
    ours.settimeout(10)
    ours.sendall(b"ping")
    assert ours.recv(100) == b"PING"
    assert ours.recv(100) == b""       # the program ended: EOF, nothing else holds the other end
    runner.join()
    assert box["out"].passed and "stdout is not the channel" in box["out"].stdout
    assert theirs.fileno() == -1       # run() took the channel over and closed it
    assert_survives(sandbox)


@root_only
@pytest.mark.parametrize("forkserver", [True, False])
def test_hidden_paths_are_invisible_to_the_program(forkserver):
    import shutil

    secret_dir = Path(tempfile.mkdtemp(dir=_harness_dir()))     # hidden as a folder
    other_dir = Path(tempfile.mkdtemp(dir=_harness_dir()))      # one file hidden, one not
    try:
        for folder in (secret_dir, other_dir):
            os.chmod(folder, 0o755)
        for path, text in ((secret_dir / "tests.txt", "expected values"), (other_dir / "lone.txt", "expected too"),
                           (other_dir / "visible.txt", "fine")):
            path.write_text(text)
            os.chmod(path, 0o644)         # readable by every uid on the host
        read_all = (f"import os\nprint(sorted(os.listdir({str(secret_dir)!r})))\n"
                    f"print(repr(open({str(other_dir / 'lone.txt')!r}).read()))\n"
                    f"print(repr(open({str(other_dir / 'visible.txt')!r}).read()))\n")
        with Sandbox(SandboxLimits(wall_s=5), workers=1, forkserver=forkserver) as open_sb:
            seen = open_sb.run(read_all)
            assert "tests.txt" in seen.stdout and "expected too" in seen.stdout, seen
        with Sandbox(SandboxLimits(wall_s=5), workers=1, forkserver=forkserver,
                     hide=[secret_dir, other_dir / "lone.txt"]) as sb:
            out = sb.run(read_all)
            assert out.passed, out
            assert "tests.txt" not in out.stdout and "expected" not in out.stdout and "'fine'" in out.stdout
            assert str(secret_dir) in sb.isolation["hidden_paths"]
            escape = sb.run(f"import ctypes\nassert ctypes.CDLL(None).umount2({str(secret_dir)!r}.encode(), 2) != 0\n"
                            f"print(os.listdir({str(secret_dir)!r}))\n".replace("print(os", "import os\nprint(os"))
            assert escape.passed and "tests.txt" not in escape.stdout, escape   # the cover cannot be unmounted
    finally:
        shutil.rmtree(secret_dir, ignore_errors=True)
        shutil.rmtree(other_dir, ignore_errors=True)


@root_only
def test_two_programs_in_the_engines_code_server_cannot_talk():
    """The same pair inside the code server's own bubblewrap box (grading_host/grading_client.py: root
    there with CODE_SERVER_CAPS only, no network), where the engine runs generated code."""
    import subprocess
    import sys

    from autorl_tui.isolation import sandbox_bwrap as sb
    from autorl_tui.grading_host.grading_client import CODE_SERVER_CAPS

    leases = [sb.UidLease.acquire() for _ in range(2)]
    try:
        code = (f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
                "from autorl_tui.grading.sandbox import Sandbox, SandboxLimits\n"
                "from tests.functional.test_sandbox import _pair\n"
                f"s = Sandbox(SandboxLimits(wall_s=8, cpu_s=5), workers=2, uids={[lease.uid for lease in leases]})\n"
                "print(s.isolation['network']); print(_pair(s)); s.close()\n")
        box = sb.Sandbox(uid=0, chdir=Path("/"), ro=[REPO], keep_caps=CODE_SERVER_CAPS, network=False)
        proc = subprocess.run(box.argv([sys.executable, "-c", code]), capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin"})
    finally:
        for lease in leases:
            lease.release()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "per program" in proc.stdout and "LISTENER-ALONE" in proc.stdout and "CALLER-ALONE" in proc.stdout, proc.stdout
