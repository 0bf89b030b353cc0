"""The local executor's supervising shim: `python -m autorl_tui.executors.local_shim SPEC.json`.

It runs in its own session, makes itself a *child subreaper* (so that descendants which call
`setsid` or double-fork are re-parented to it instead of to init), starts the agent, and kills
the agent's whole tree when the agent exits, when the deadline passes, or when asked (SIGTERM).
Because it enforces the deadline itself, a run stays within budget even if the engine dies; it
writes `exit.json` so a restarted engine learns how the agent ended.

When the launch spec has a `sandbox`, the shim leases a sandbox uid (held for its own lifetime),
gives the workspace's writable folders to it and runs the agent in bubblewrap
(`sandbox_bwrap.py`): the agent's tree is then bwrap's, in its own PID namespace, and killing it
kills the namespace. Exit codes of an agent killed by a signal then read as a shell reports them
(128 + signal); an agent killed by the shim reads as negative (the shim's own kill of bwrap).
The sandbox's network (the agent spec's `network`) is set up around it by `sandbox_net.py`: the
shim holds the host side (the forwarders to the grading API and the plan's host ports, and slirp4netns
for `bridge`, attached to the sandbox's namespace before the agent's command runs).

The agent's stdout and stderr are pipes the shim copies into `stdout.log`/`stderr.log`, each capped
on disk (`capped_log.py`: head, a marker, the last bytes; `log_file_bytes` of the launch).

Signals: SIGTERM = kill now (reason in `kill_reason` file if present), SIGUSR1 = pause the tree
(SIGSTOP), SIGUSR2 = resume (SIGCONT). The deadline is re-read from `deadline` in the log dir, so
the engine can extend it.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from autorl_tui.executors.capped_log import CappedLog, agent_pipe, copy_pipe

PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.2
COPY_WAIT_S = 30.0


def set_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except OSError:
        return False


def children_of(pid: int) -> list[int]:
    """Direct children of pid, from /proc (all threads)."""
    out: list[int] = []
    task_dir = Path(f"/proc/{pid}/task")
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return out
    for tid in tids:
        try:
            out.extend(int(x) for x in (task_dir / tid / "children").read_text().split())
        except OSError:
            continue
    return out


def descendants(pid: int) -> list[int]:
    seen: list[int] = []
    stack = children_of(pid)
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.append(p)
        stack.extend(children_of(p))
    return seen


REAPED: dict[int, int] = {}   # pid -> exit code, for children reaped while sweeping the tree


def reap_zombies() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        REAPED[pid] = os.waitstatus_to_exitcode(status)


def kill_tree(me: int, sig: int = signal.SIGKILL, rounds: int = 50) -> None:
    """Kill every descendant; repeat until none is left (a forking process may add new ones)."""
    for _ in range(rounds):
        procs = descendants(me)
        if not procs:
            return
        for p in procs:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
        reap_zombies()


def signal_tree(me: int, sig: int) -> None:
    for p in descendants(me):
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def read_deadline(log_dir: Path, fallback: float) -> float:
    try:
        return float((log_dir / "deadline").read_text().strip())
    except (OSError, ValueError):
        return fallback


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    log_dir = Path(spec["log_dir"])
    me = os.getpid()
    subreaper = set_subreaper()
    state = {"kill": None}

    def on_term(signum, frame):
        state["kill"] = "killed"

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    signal.signal(signal.SIGUSR1, lambda s, f: signal_tree(me, signal.SIGSTOP))
    signal.signal(signal.SIGUSR2, lambda s, f: signal_tree(me, signal.SIGCONT))

    command = spec["command"]
    logs = [CappedLog(log_dir / name, spec.get("log_file_bytes")) for name in ("stdout.log", "stderr.log")]
    pipes = [agent_pipe() for _ in logs]
    started = time.time()
    sandbox = spec.get("sandbox")
    lease = net = None
    uid = None
    env = spec["env"]
    pass_fds: list[int] = []
    hold = None    # bridge: (info pipe's read end, block pipe's write end) until slirp4netns is attached
    if sandbox is not None:
        # The lease lives as long as this shim, which outlives the agent's whole tree.
        from autorl_tui.isolation import sandbox_bwrap as sb
        from autorl_tui.isolation import sandbox_net as sn

        try:
            lease = sb.UidLease.acquire()
            uid = lease.uid
            workspace = Path(spec["workspace"])
            sb.chown_tree(workspace, uid, tuple(sandbox["writable"]))
            argv = command if isinstance(command, list) else ["/bin/sh", "-c", command]
            exe = argv[0] if os.path.isabs(argv[0]) else shutil.which(argv[0], path=spec["env"].get("PATH", ""))
            if exe is None or not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
                raise FileNotFoundError(2, f"No such file or directory: {argv[0]!r} (not an executable on the agent's PATH)")
            if "runtime" not in sandbox:
                raise OSError("the launch names no agent runtime (an older engine wrote it); retry the run")
            net = sn.SandboxNetwork.plan(sandbox.get("network", "none"), uid, env, sandbox.get("host_ports") or [])
            net.open()
            env = net.agent_env(env)
            gpus = [str(g) for g in sandbox.get("gpus") or []]
            if gpus:
                env = dict(env, CUDA_VISIBLE_DEVICES=sb.visible_devices(gpus))
            info = block = None
            if net.mode == "bridge":
                info, block = os.pipe(), os.pipe()
                pass_fds, hold = [info[1], block[0]], (info[0], block[1])
            from autorl_tui.isolation.seccomp_userns import filter_fd

            seccomp = filter_fd()      # no user namespaces inside
            pass_fds.append(seccomp)
            box = sb.Sandbox(uid=uid, chdir=workspace, ro=[Path(p) for p in sandbox["ro"]], rw=[workspace],
                             ro_inside=[Path(p) for p in sandbox["ro_inside"]], hide=[Path(p) for p in sandbox["hide"]],
                             gpus=gpus, network=not net.isolated, net_args=net.bwrap_args(),
                             info_fd=info and info[1], block_fd=block and block[0], seccomp_fd=seccomp,
                             runtime=[Path(p) for p in sandbox["runtime"]],   # the agent runtime, never the harness's
                             bwrap=sandbox.get("bwrap"))
            command = box.argv(net.command(inside_python(), argv))
        except FileNotFoundError as exc:
            return _ended(log_dir, net, 127, "start_failed", exc)
        except OSError as exc:
            return _ended(log_dir, net, 126, "sandbox_failed", exc)
    os.umask(0o022)
    try:
        proc = subprocess.Popen(command, shell=isinstance(command, str), cwd=spec["workspace"], env=env,
                                stdin=subprocess.DEVNULL, stdout=pipes[0][1], stderr=pipes[1][1],
                                start_new_session=True, close_fds=True, pass_fds=pass_fds)
    except OSError as exc:
        return _ended(log_dir, net, 127, "start_failed", exc)
    finally:
        for fd in pass_fds:
            os.close(fd)
    if hold is not None:
        try:
            net.attach(_sandbox_pid(hold[0]))
            os.write(hold[1], b"1")        # the agent's command may run now
        except OSError as exc:
            proc.kill()
            proc.wait()
            return _ended(log_dir, net, 126, "sandbox_failed", exc)
        finally:
            os.close(hold[0])
            os.close(hold[1])
    copiers = []
    for (read_fd, write_fd), log in zip(pipes, logs):
        os.close(write_fd)           # the agent holds the write ends: EOF once its whole tree is gone
        copiers.append(copy_pipe(read_fd, log))
    write_json_atomic(log_dir / "shim.json", {"shim_pid": me, "agent_pid": proc.pid, "started_at": started,
                                              "subreaper": subreaper, "uid": uid, "sandbox": sandbox is not None})
    reason = "exited"
    while True:
        code = proc.poll()
        if code is not None:
            break
        if state["kill"]:
            reason = state["kill"]
            try:
                reason = (log_dir / "kill_reason").read_text().strip() or reason
            except OSError:
                pass
            break
        if time.time() >= read_deadline(log_dir, spec["deadline"]):
            reason = "deadline"
            break
        time.sleep(POLL_S)
    kill_tree(me)
    code = REAPED[proc.pid] if proc.pid in REAPED else proc.wait()
    kill_tree(me)   # anything the agent left behind (daemons, setsid children) dies with it
    reap_zombies()
    for copier in copiers:          # everything the agent wrote is in its log before exit.json says it ended
        copier.join(COPY_WAIT_S)
    for log in logs:
        log.close()
    if net is not None:
        net.close()
    write_json_atomic(log_dir / "exit.json", {"exit_code": code, "reason": reason, "ended_at": time.time(),
                                              "started_at": started})
    return 0


def _ended(log_dir: Path, net, code: int, reason: str, exc: OSError) -> int:
    """exit.json for an agent that never ran (its command, or its sandbox, could not start)."""
    if net is not None:
        net.close()
    write_json_atomic(log_dir / "exit.json", {"exit_code": code, "reason": reason, "error": str(exc),
                                              "ended_at": time.time()})
    return 0


def inside_python() -> str:
    """The interpreter that runs the sandbox's loopback forwarders (stdlib only): the system's."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else os.path.realpath(sys.executable)


def _sandbox_pid(info_fd: int) -> int:
    """The sandbox's pid, from bwrap's --info-fd JSON (written once its namespaces exist)."""
    data = b""
    while b"}" not in data:
        chunk = os.read(info_fd, 4096)
        if not chunk:
            raise OSError(f"bubblewrap ended before its sandbox existed: {data.decode(errors='replace')!r}")
        data += chunk
    return int(json.loads(data[:data.index(b"}") + 1])["child-pid"])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
