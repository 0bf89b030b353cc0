"""Runs inside the sandbox (started by grading/sandbox.py with `python -s -S`; stdlib only).

Reads one JSON request from stdin, then:
  1. as root (when it is): enters the shared empty network namespace (fd passed by the harness),
     mounts private tmpfs over the world-writable folders (/tmp, /var/tmp, /dev/shm, /run/lock)
     so writes outside the work dir vanish with the sandbox, makes the private work dir;
  2. forks: the child sets the resource limits, drops to the sandbox uid/gid, clears the
     environment and executes the program; the parent (pid 1 of the pid namespace, still root, so
     the program cannot signal it) waits and writes the child's exit status.
Results go to the status fd as records (4-byte length + marshal of a dict; marshal because
importing json costs more than the rest of start-up). `{"event": "ok", "nonce": ...}` is written only
after the program ran to its end; the nonce (read from stdin, never in argv or the environment)
stops a program from faking success by exiting early with status 0.

`--serve` (the fork server, used by default when the sandbox has root and all namespaces): the
runner stays alive as pid 1 of its namespaces with common modules imported, and forks one
child per program; before each program it mounts fresh tmpfs folders, and after it kills every
process of the sandbox uid (escapees included) and reaps them. Requests and replies travel as
length-prefixed marshal records over stdin/stdout. Saves the interpreter start per program.

Channel: a request may come with a socket (`channel_fd` in one-shot mode; in the fork server, sent
over its fd socket with SCM_RIGHTS) that the program gets as fd 4 (`CHANNEL_FD`): the
harness's trusted checker talks to the code under test over it (grading/code_protocol.py).
Hidden paths: `hide` lists files and folders covered (an empty read-only tmpfs, /dev/null for
files) in the sandbox's mount namespace before any program runs: test data the program must
not read even where the file system lets every uid read it.
"""

import os
import sys

# The script's folder (autorl_tui/grading, which has a types.py) must not shadow the stdlib,
# and programs must not import the harness's modules: drop it before any other import.
if sys.path and os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]


class AllowedPackages:
    """Finds the few packages the harness lets programs import ("numpy=/site/dir" pairs in
    $AUTORL_SANDBOX_PACKAGES), each in its own folder only: no other module of site-packages."""

    def __init__(self, spec):
        self.dirs = dict(p.split("=", 1) for p in spec.split(os.pathsep) if "=" in p)

    def find_spec(self, name, path=None, target=None):
        if path is None and name in self.dirs:
            from importlib.machinery import PathFinder
            return PathFinder.find_spec(name, [self.dirs[name]])
        return None


sys.meta_path.append(AllowedPackages(os.environ.pop("AUTORL_SANDBOX_PACKAGES", "")))

import marshal  # noqa: E402
import resource  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import time  # noqa: E402

CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND = 1, 2, 4, 4096
CHANNEL_FD = 4
PRIVATE_TMPFS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")


def _libc():
    import ctypes   # only when namespaces are in use
    return ctypes.CDLL(None, use_errno=True)


def _check(ret, what):
    if ret != 0:
        import ctypes
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def enter_netns(fd):
    _check(_libc().setns(fd, CLONE_NEWNET), "setns(net)")
    os.close(fd)


def new_netns():
    """A network namespace of this program's own: no other program shares its loopback or its
    abstract unix sockets (two programs graded at once cannot talk)."""
    _check(_libc().unshare(CLONE_NEWNET), "unshare(net)")


def mount_private_tmp(size, fresh=False):
    libc = _libc()
    for target in PRIVATE_TMPFS:
        if os.path.isdir(target):
            if fresh:   # drop the previous program's tmpfs (MNT_DETACH); a no-op error if none is mounted
                libc.umount2(target.encode(), 2)
            opts = f"size={size},mode=1777".encode()
            _check(libc.mount(b"tmpfs", target.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts),
                   f"mount tmpfs on {target}")


def hide_paths(paths):
    libc = _libc()
    for path in paths or ():
        if os.path.isdir(path):
            _check(libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, b"size=4k,mode=0555"),
                   f"hide {path}")
        elif os.path.exists(path):
            _check(libc.mount(b"/dev/null", path.encode(), None, MS_BIND, None), f"hide {path}")


def place_channel(channel, keep):
    """Move the channel socket to CHANNEL_FD; `keep` (an fd that must survive) moves away first. Returns keep."""
    if keep == CHANNEL_FD:
        keep = os.dup(keep)
    if channel != CHANNEL_FD:
        os.dup2(channel, CHANNEL_FD)
        os.close(channel)
    os.set_inheritable(CHANNEL_FD, True)
    return keep


def set_limits(lim):
    def setr(which, value):
        resource.setrlimit(which, (value, value))
    setr(resource.RLIMIT_CORE, 0)
    if lim.get("cpu_s"):
        cpu = int(lim["cpu_s"])
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))   # SIGXCPU, then SIGKILL a second later
    if lim.get("memory_bytes"):
        setr(resource.RLIMIT_AS, int(lim["memory_bytes"]))
    if lim.get("file_size_bytes") is not None:
        setr(resource.RLIMIT_FSIZE, int(lim["file_size_bytes"]))
    if lim.get("nproc"):
        setr(resource.RLIMIT_NPROC, int(lim["nproc"]))
    if lim.get("nofile"):
        setr(resource.RLIMIT_NOFILE, int(lim["nofile"]))


def no_new_privs():
    """setuid binaries (su, mount, ...) cannot raise the program's privileges again."""
    _check(_libc().prctl(38, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


def drop_privileges(uid, gid):
    no_new_privs()
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def error_record(exc, filename):
    """The exception's last line and where in the program it was raised."""
    import traceback
    tb = traceback.extract_tb(exc.__traceback__)
    frames = [f for f in tb if f.filename == filename]
    where = frames[-1] if frames else None
    lines = traceback.format_exception_only(type(exc), exc)
    return {"event": "error", "type": type(exc).__name__,
            "message": (lines[-1].strip() if lines else type(exc).__name__)[:2000],
            "lineno": where.lineno if where else None,
            "line": (where.line or "")[:500] if where else None,
            "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:]}


def write_record(fd, rec):
    data = marshal.dumps(rec)
    os.write(fd, len(data).to_bytes(4, "big") + data)


def run_program(req, status, filename):
    """In the child: limits, drop privileges, run. Never returns."""
    me = os.getpid()

    def report(rec):
        if os.getpid() == me:       # forked children of the program never report
            try:
                write_record(status, rec)
            except OSError:
                pass

    try:
        with open(filename) as fh:
            source = fh.read()
        set_limits(req["limits"])
        if req.get("uid") is not None:
            drop_privileges(req["uid"], req["gid"])
        os.environ.clear()
        os.environ.update(req.get("env") or {})
        sys.argv = [filename]
        sys.path.insert(0, os.path.dirname(filename))
    except BaseException as exc:  # the harness's own setup failed: say so, distinctly
        report({"event": "setup_error", "message": f"{type(exc).__name__}: {exc}"})
        os._exit(70)
    try:
        code = compile(source, filename, "exec")
    except (SyntaxError, ValueError) as exc:
        report(error_record(exc, filename) | {"event": "syntax_error", "lineno": getattr(exc, "lineno", None),
                                               "line": (getattr(exc, "text", None) or "").strip()[:500]})
        os._exit(1)
    nonce = req["nonce"]
    del req
    try:
        exec(code, {"__name__": "__main__", "__file__": filename})
    except BaseException as exc:
        rec = error_record(exc, filename)
        if isinstance(exc, SystemExit):
            rec["event"] = "exit"
            rec["code"] = exc.code if isinstance(exc.code, (int, type(None))) else str(exc.code)
        report(rec)
        _flush()
        os._exit(1)
    _flush()
    report({"event": "ok", "nonce": nonce})
    os._exit(0)


def _flush():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def main():
    req = marshal.loads(sys.stdin.buffer.read())
    os.close(0)
    os.open(os.devnull, os.O_RDONLY)   # the program gets an empty stdin (fd 0)
    status = int(req["status_fd"])
    try:
        if req.get("netns_fd") is not None:
            enter_netns(int(req["netns_fd"]))
        if req.get("new_netns"):
            new_netns()
        if req.get("channel_fd") is not None:
            status = place_channel(int(req["channel_fd"]), status)
        workdir = req["workdir"]
        if req.get("private_tmp"):
            mount_private_tmp(req.get("tmpfs_size", "64m"))
            hide_paths(req.get("hide"))
            os.makedirs(workdir, mode=0o700, exist_ok=True)
        filename = os.path.join(workdir, "main.py")
        with open(filename, "w") as fh:
            fh.write(req["program"])
        if req.get("uid") is not None:
            os.chown(workdir, req["uid"], req["gid"])
            os.chown(filename, req["uid"], req["gid"])
        os.chdir(workdir)
    except BaseException as exc:
        write_record(status, {"event": "setup_error", "message": f"{type(exc).__name__}: {exc}"})
        os._exit(70)
    pid = os.fork()
    if pid == 0:
        run_program(req, status, filename)
    _, wstatus = os.waitpid(pid, 0)
    rec = {"event": "exited"}
    if os.WIFSIGNALED(wstatus):
        rec["signal"] = os.WTERMSIG(wstatus)
    else:
        rec["code"] = os.WEXITSTATUS(wstatus)
    write_record(status, rec)
    os._exit(0)


# ---------------------------------------------------------------------------------- fork server

PRELOAD = ("typing", "re", "math", "collections", "itertools", "functools", "string", "heapq", "bisect",
           "hashlib", "fractions", "random", "json", "statistics", "copy", "operator", "decimal", "datetime")


def read_msg(fd):
    head = _read_exact(fd, 4)
    if head is None:
        return None
    body = _read_exact(fd, int.from_bytes(head, "big"))
    return None if body is None else marshal.loads(body)


def _read_exact(fd, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def send_msg(fd, obj):
    data = marshal.dumps(obj)
    data = len(data).to_bytes(4, "big") + data
    while data:
        data = data[os.write(fd, data):]


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _others():
    me = os.getpid()
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]


def kill_all_of(uid):
    """Kill every process of uid in this pid namespace (the program, its children, setsid escapees)."""
    for _ in range(100):
        _reap()
        if not _others():
            return True
        helper = os.fork()
        if helper == 0:   # signalling as the uid itself reaches exactly its processes (kill(-1) spares the caller)
            try:
                os.setresuid(uid, uid, uid)
                for _ in range(3):
                    os.kill(-1, signal.SIGKILL)
            except BaseException:
                pass
            os._exit(0)
        os.waitpid(helper, 0)
        time.sleep(0.001)
    return False


def serve():
    import socket
    chan_in, chan_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    cfg = read_msg(chan_in)
    try:
        if cfg.get("netns_fd") is not None:
            enter_netns(int(cfg["netns_fd"]))
        hide_paths(cfg.get("hide"))
        cfg["fd_sock"] = socket.socket(fileno=int(cfg["fd_sock"]))
        for name in PRELOAD:
            try:
                __import__(name)
            except ImportError:
                pass
    except BaseException as exc:
        send_msg(chan_out, {"event": "error", "message": f"{type(exc).__name__}: {exc}"})
        os._exit(70)
    send_msg(chan_out, {"event": "ready", "pid": os.getpid()})
    while True:
        req = read_msg(chan_in)
        if req is None:
            os._exit(0)
        try:
            reply = serve_one({**cfg, **req}, chan_in, chan_out)
        except BaseException as exc:
            reply = {"setup_error": f"{type(exc).__name__}: {exc}"}
        send_msg(chan_out, reply)


def serve_one(req, chan_in, chan_out):
    uid = req["uid"]
    channel = None
    if req.get("channel"):   # sent just before the request; taken first so a failed set-up leaves none behind
        import socket
        _, fds, _, _ = socket.recv_fds(req["fd_sock"], 1, 1)
        if len(fds) != 1:
            raise OSError("the channel socket did not arrive")
        channel = fds[0]
    mount_private_tmp(req.get("tmpfs_size", "64m"), fresh=True)
    workdir = req["workdir"]
    os.makedirs(workdir, mode=0o700, exist_ok=True)
    filename = os.path.join(workdir, "main.py")
    with open(filename, "w") as fh:
        fh.write(req["program"])
    os.chown(workdir, uid, req["gid"])
    os.chown(filename, uid, req["gid"])
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    st_r, st_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            import fcntl
            high = fcntl.fcntl(channel, fcntl.F_DUPFD, 16) if channel is not None else None
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            os.dup2(st_w, 3)
            if high is not None:
                place_channel(high, 3)
            os.closerange(CHANNEL_FD + 1 if high is not None else CHANNEL_FD, 1 << 16)
            os.chdir(workdir)
            if req.get("new_netns"):
                new_netns()
        except BaseException:
            os._exit(70)
        run_program(req, 3, filename)
    for fd in (out_w, err_w, st_w) + ((channel,) if channel is not None else ()):
        os.close(fd)
    caps = {out_r: int(req["output_bytes"]), err_r: int(req["output_bytes"]), st_r: 1 << 20}
    bufs = {out_r: bytearray(), err_r: bytearray(), st_r: bytearray()}
    truncated = False
    open_fds = [out_r, err_r, st_r]
    deadline = time.monotonic() + float(req["wall_s"])
    wstatus = None
    ended = None
    timed_out = False
    while True:
        now = time.monotonic()
        if wstatus is None:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                wstatus, ended = st, now
        if wstatus is not None and (not open_fds or now - ended > 0.2):
            break   # finished; pipes still open after 0.2 s belong to escapees, killed below
        if now >= deadline:
            timed_out = True
            break
        if not open_fds:
            time.sleep(0.002)
            continue
        ready, _, _ = select.select(open_fds, [], [], min(deadline - now, 0.02 if wstatus is not None else 0.2))
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.remove(fd)
                continue
            room = caps[fd] - len(bufs[fd])
            if len(chunk) > room and fd != st_r:
                truncated = True
            if room > 0:
                bufs[fd] += chunk[:room]
    clean = kill_all_of(uid)
    if wstatus is None:
        try:
            _, wstatus = os.waitpid(pid, 0)
        except ChildProcessError:
            wstatus = None
    for fd in (out_r, err_r, st_r):   # what is left in the pipes (their writers are dead now)
        if fd in open_fds:
            while True:
                r, _, _ = select.select([fd], [], [], 0)
                if not r:
                    break
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                room = caps[fd] - len(bufs[fd])
                if len(chunk) > room and fd != st_r:
                    truncated = True
                if room > 0:
                    bufs[fd] += chunk[:room]
        os.close(fd)
    exited = {"event": "exited"}
    if wstatus is not None:
        if os.WIFSIGNALED(wstatus):
            exited["signal"] = os.WTERMSIG(wstatus)
        else:
            exited["code"] = os.WEXITSTATUS(wstatus)
    return {"stdout": bytes(bufs[out_r]), "stderr": bytes(bufs[err_r]), "status": bytes(bufs[st_r]),
            "exited": exited, "truncated": truncated, "timed_out": timed_out, "clean": clean}


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main()
