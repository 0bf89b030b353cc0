"""A sandboxed process runs as a leased uid that has no passwd entry on the host (the GPU machine
of issue 35 had none: torch inductor's getpass.getuser() failed with "getpwuid(): uid not
found"). Every sandboxed child gets HOME (a folder it owns and may write), USER and LOGNAME, so
getpass.getuser(), os.path.expanduser("~") and pathlib.Path.home() need no passwd lookup. Real
bwrap, real leased uids, a real local agent through the shim, the real code sandbox."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autorl_tui.grading.sandbox_identity import SANDBOX_USER, identity_env
from tests.support.harness import make_reachable_home
from tests.support.local_agent import run_local_agent

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which(os.environ.get("AUTORL_BWRAP") or "bwrap") is None,
                                reason="the sandbox needs root and bubblewrap")

# Who am I, where is home, and can I write there: what triton and torch inductor ask.
WHO = ("import getpass, json, os, pathlib, sys\n"
       "home = pathlib.Path.home()\n"
       "(home / '.cache-probe').write_text('x')\n"
       "print(json.dumps([getpass.getuser(), os.path.expanduser('~'), str(home), os.getuid(),\n"
       "                  home.stat().st_uid]))\n")


def _no_passwd_entry(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
    except KeyError:
        return True
    return False


def test_a_bare_sandbox_gives_user_and_logname_and_the_callers_home():
    from autorl_tui.isolation.sandbox_bwrap import Sandbox, UidLease, chown_tree

    home = Path(make_reachable_home("autorl-who-"))
    home.mkdir()
    try:
        with UidLease.acquire() as lease:
            assert _no_passwd_entry(lease.uid)        # what makes the lookup fail without the fix
            chown_tree(home, lease.uid)
            argv = Sandbox(uid=lease.uid, chdir=home, rw=[home]).argv([sys.executable, "-c", WHO])
            # The environment every caller gives: PATH and HOME; USER and LOGNAME come from the sandbox.
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                                  env={"PATH": "/usr/bin:/bin", "HOME": str(home)})
            assert proc.returncode == 0, proc.stderr[-2000:]
            user, tilde, path_home, uid, owner = json.loads(proc.stdout.strip().splitlines()[-1])
            assert (user, tilde, path_home) == (SANDBOX_USER, str(home), str(home))
            assert uid == owner == lease.uid
    finally:
        shutil.rmtree(home.parent, ignore_errors=True)


def test_the_grader_environment_carries_its_identity():
    """The cold grader and the warm grader's children run with this environment (their env is
    replaced wholesale in the warm server's child, so bwrap's --setenv alone would not reach it)."""
    from autorl_tui.isolation.sandbox_bwrap import Sandbox, UidLease, chown_tree

    work = Path(make_reachable_home("autorl-who-"))
    work.mkdir()
    try:
        with UidLease.acquire() as lease:
            chown_tree(work, lease.uid)
            # keep_caps: the warm server's own sandbox (root inside), then the child drops to the uid
            # with exactly the job's environment, as grading/warm_server.py does.
            drop = (f"import os, sys; os.setgid({lease.uid}); os.setuid({lease.uid}); os.environ.clear(); "
                    f"os.environ.update({identity_env(str(work))!r}); os.environ['PATH'] = '/usr/bin:/bin'; "
                    f"exec({WHO!r})")
            argv = Sandbox(uid=0, chdir=work, rw=[work], keep_caps=("CAP_SETUID", "CAP_SETGID")).argv(
                [sys.executable, "-c", drop])
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, env={"PATH": "/usr/bin:/bin"})
            assert proc.returncode == 0, proc.stderr[-2000:]
            user, tilde, path_home, uid, owner = json.loads(proc.stdout.strip().splitlines()[-1])
            assert (user, tilde, path_home, uid, owner) == (SANDBOX_USER, str(work), str(work), lease.uid, lease.uid)
    finally:
        shutil.rmtree(work.parent, ignore_errors=True)


def test_a_sandboxed_local_agent_needs_no_passwd_entry():
    root = make_reachable_home("autorl-who-")
    root.mkdir()
    try:
        info, out, err = run_local_agent(root, ["/usr/bin/python3", "-c", WHO])
        assert info.get("exit_code") == 0, (info, err[-2000:])
        user, tilde, path_home, uid, owner = json.loads(out.strip().splitlines()[-1])
        assert (user, tilde, path_home) == (SANDBOX_USER, str(root / "ws"), str(root / "ws"))
        assert uid == owner and _no_passwd_entry(uid)
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


def test_a_program_in_the_code_sandbox_needs_no_passwd_entry():
    from autorl_tui.grading.sandbox import Sandbox, SandboxLimits

    with Sandbox(SandboxLimits(wall_s=20, cpu_s=10), workers=1) as sb:
        outcome = sb.run(WHO)
    assert outcome.passed, outcome
    user, tilde, path_home, uid, owner = json.loads(outcome.stdout.strip().splitlines()[-1])
    assert user == SANDBOX_USER and tilde == path_home and uid == owner


def test_the_engines_bwrap_setting_reaches_the_agents_shim(monkeypatch):
    """AUTORL_BWRAP names a bubblewrap outside PATH (a GPU box given an unpacked one): the agent's
    sandbox is built with it, though the shim runs with a minimal environment (GPU run 2 failed
    with "No such file or directory: '/usr/bin/bwrap'")."""
    root = make_reachable_home("autorl-bwrap-")
    root.mkdir()
    try:
        real = shutil.which(os.environ.get("AUTORL_BWRAP") or "bwrap")
        marker = root / "wrapper-called"
        wrapper = root / "tools" / "bwrap-wrapper"
        wrapper.parent.mkdir()
        wrapper.write_text(f"#!/bin/sh\necho called > {marker}\nexec {real} \"$@\"\n")
        wrapper.chmod(0o755)
        monkeypatch.setenv("AUTORL_BWRAP", str(wrapper))
        info, out, err = run_local_agent(root, ["/usr/bin/python3", "-c", "print('inside')"])
        assert info.get("exit_code") == 0, (info, err[-2000:])
        assert out.strip().endswith("inside")
        assert marker.read_text().strip() == "called"
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)
