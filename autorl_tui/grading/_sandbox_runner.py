"""Runs inside the sandbox (started by grading/sandbox.py with `python -I -S`; stdlib only).

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
"""

import marshal
import os
import resource
import sys

CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV = 2, 4
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


def mount_private_tmp(size):
    libc = _libc()
    for target in PRIVATE_TMPFS:
        if os.path.isdir(target):
            opts = f"size={size},mode=1777".encode()
            _check(libc.mount(b"tmpfs", target.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts),
                   f"mount tmpfs on {target}")


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


def drop_privileges(uid, gid):
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
        workdir = req["workdir"]
        if req.get("private_tmp"):
            mount_private_tmp(req.get("tmpfs_size", "64m"))
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


if __name__ == "__main__":
    main()
