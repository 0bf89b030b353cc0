"""The CLI as an operator types it, through real subprocesses: `--home` anywhere, bad homes,
short run ids, `runs list` in a terminal and in a pipe, and the way back after Ctrl-C."""

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from autorl_tui.store.db import Store
from tests.support.harness import REPO, cli
from tests.support.run_writer import RunShape, write_run

IDS = ["r0001-arith-small-baseline-copy-s0", "r0002-arith-small-baseline-copy-s1",
       "r0010-arith-small-reference-agent-s0"]


@pytest.fixture
def home_with_runs(tmp_path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    store = Store(home / "store.db")
    for seed, rid in enumerate(IDS):
        write_run(store, RunShape(run_id=rid, seed=seed, task="arith-small"))
    store.flush()
    store.close()
    return home


def assert_clean_error(proc, *phrases):
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    assert proc.stderr.startswith("autorl-tui: error: "), proc.stderr
    for phrase in phrases:
        assert phrase in proc.stderr, proc.stderr


def test_home_is_accepted_after_the_command_at_any_depth(home_with_runs, tmp_path):
    for argv in (["runs", "list", "--home", str(home_with_runs)], ["runs", "--home", str(home_with_runs), "list"],
                 ["--home", str(tmp_path / "other"), "runs", "list", "--home", str(home_with_runs)]):
        proc = cli(*argv)
        assert proc.returncode == 0, proc.stderr
        assert IDS[0] in proc.stdout, argv
    proc = cli("--home", str(home_with_runs), "runs", "list")        # before the command still works
    assert proc.returncode == 0 and IDS[2] in proc.stdout


def test_a_home_that_is_a_file_is_a_clear_usage_error(tmp_path):
    afile = tmp_path / "home.txt"
    afile.write_text("not a home\n")
    plan = REPO / "data" / "plans" / "demo.yaml"
    for argv in (["runs", "list"], ["report", "r0001"], ["--batch", str(plan)], ["models", "list"]):
        assert_clean_error(cli(*argv, home=afile), "is a file, not a folder", "--home")
    assert_clean_error(cli("runs", "list", home=afile / "sub"), "is a file")
    assert afile.read_text() == "not a home\n"


def test_a_read_only_home_is_a_clear_usage_error_and_nothing_is_written(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "existing").mkdir()
    plan = REPO / "data" / "plans" / "demo.yaml"
    proc = cli_read_only(ro / "existing", "--batch", str(plan))
    assert_clean_error(proc, "is not writable", "--home")
    assert list((ro / "existing").iterdir()) == []


def cli_read_only(home: Path, *argv: str) -> subprocess.CompletedProcess:
    """`autorl-tui --home HOME ARGV...` with HOME read-only for it (a shared results folder)."""
    args = [sys.executable, "-m", "autorl_tui", "--home", str(home), *argv]
    env = dict(os.environ, PYTHONPATH=str(REPO))
    if os.geteuid() == 0:   # root ignores permission bits: make the folder a read-only mount in a private namespace
        script = f"mount --bind {home} {home} && mount -o remount,bind,ro {home} && exec \"$@\""
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *args]
    else:
        os.chmod(home, 0o555)
        cmd = args
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    finally:
        if os.geteuid() != 0:
            os.chmod(home, 0o755)


def test_every_reading_command_works_on_a_read_only_home_holding_a_store(home_with_runs, tmp_path):
    before = sorted(p.name for p in home_with_runs.iterdir())
    listed = cli_read_only(home_with_runs, "runs", "list")
    assert listed.returncode == 0 and IDS[0] in listed.stdout, listed.stderr
    exported = cli_read_only(home_with_runs, "export", "r0001", "--json", str(tmp_path / "e.json"))
    assert exported.returncode == 0, exported.stderr
    assert json.loads((tmp_path / "e.json").read_text())["run_id"] == IDS[0]
    report = cli_read_only(home_with_runs, "report", "r0001", "--html", str(tmp_path / "r.html"),
                           "--json", str(tmp_path / "r.json"))
    assert report.returncode == 0, report.stderr
    assert json.loads((tmp_path / "r.json").read_text())["run"]["run_id"] == IDS[0]
    compare = cli_read_only(home_with_runs, "compare", IDS[0], IDS[1], "--json", str(tmp_path / "c.json"))
    assert compare.returncode == 0, compare.stderr
    # without output paths the home's reports/ folder is the default: a one-line error says what to pass
    assert_clean_error(cli_read_only(home_with_runs, "report", "r0001"), "cannot write", "--html PATH")
    assert sorted(p.name for p in home_with_runs.iterdir()) == before        # nothing written into the home


def test_short_ids_and_unique_prefixes_name_runs_ambiguous_ones_list_candidates(home_with_runs, tmp_path):
    out = tmp_path / "r.json"
    proc = cli("export", "r0001", "--json", str(out), home=home_with_runs)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["run"]["id"] == IDS[0]
    proc = cli("report", "r0010", "--json", str(tmp_path / "rep.json"), home=home_with_runs)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "rep.json").read_text())["run"]["run_id"] == IDS[2]
    proc = cli("report", "r001", home=home_with_runs)     # a unique prefix; default paths use the full id
    assert proc.returncode == 0, proc.stderr
    assert (home_with_runs / "reports" / f"{IDS[2]}.html").exists()
    for command in (["export", "r000", "--json", "-"], ["report", "r000"]):
        proc = cli(*command, home=home_with_runs)
        assert_clean_error(proc, "ambiguous", IDS[0], IDS[1])
        assert IDS[2] not in proc.stderr
    assert_clean_error(cli("export", "r9", "--json", "-", home=home_with_runs), "no run 'r9'", "runs list")


def test_runs_list_in_a_pipe_is_tab_separated_with_full_ids(home_with_runs):
    proc = cli("runs", "list", home=home_with_runs)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0
    assert lines[0].split("\t")[:3] == ["run", "state", "task"]
    rows = [line.split("\t") for line in lines[1:]]
    assert sorted(r[0] for r in rows) == sorted(IDS)
    assert all(len(r) == len(lines[0].split("\t")) for r in rows)


def _run_in_terminal(argv: list[str], columns: int) -> str:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(PYTHONPATH=str(REPO), TERM="xterm")
    proc = subprocess.Popen([sys.executable, "-m", "autorl_tui", *argv], stdout=slave, stderr=slave,
                            stdin=subprocess.DEVNULL, env=env, cwd=REPO)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:      # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=60) == 0
    os.close(master)
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.parametrize("columns", [80, 200])
def test_runs_list_in_a_terminal_fits_the_width_and_never_cuts_ids(home_with_runs, columns):
    out = _run_in_terminal(["--home", str(home_with_runs), "runs", "list"], columns)
    lines = out.splitlines()
    assert all(len(line) <= columns for line in lines), out
    table = [line for line in lines if line.startswith("r0")]
    assert sorted(line.split()[0] for line in table) == sorted(IDS), out
    header = next(line for line in lines if line.startswith("run "))
    assert "state" in header and "test" in header and "best dev" in header   # scores are the last to go
    if columns == 200:          # like beside like: base dev / best dev, base test / test
        names = [c.strip() for c in header.split("  ") if c.strip()]
        assert names.index("base dev") + 1 == names.index("best dev"), names
        assert names.index("base test") + 1 == names.index("test"), names
    if columns == 80:
        assert "left out to fit the width" in out and "ended" not in header
    else:
        assert "left out" not in out and "ended" in header


def test_runs_list_json_into_a_closed_pipe_exits_quietly(home_with_runs):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "autorl_tui", "--home", str(home_with_runs), "runs", "list", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO)
    proc.stdout.close()                # the reader is gone before the first write (like `| head` after its lines)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_retry_refuses_a_run_that_finished_and_names_what_can_be_retried(home_with_runs):
    assert_clean_error(cli("retry", "r0002", home=home_with_runs), IDS[1], "only failed, cancelled or lost runs")


def test_runs_list_says_when_no_engine_watches_runs_recorded_as_active(tmp_path):
    from autorl_tui.home import EngineLock, Home

    home = tmp_path / "home"
    home.mkdir()
    store = Store(home / "store.db")
    write_run(store, RunShape(run_id="r0001-arith-a-s0", state="running"))
    write_run(store, RunShape(run_id="r0002-arith-a-s1", seed=1))
    store.flush()
    store.close()
    proc = cli("runs", "list", home=home)
    assert proc.returncode == 0
    assert "no engine holds" in proc.stderr and "1 run(s) recorded as running" in proc.stderr, proc.stderr
    assert "old" in proc.stderr and "autorl-tui resume" in proc.stderr
    rows = {r["id"]: r for r in json.loads(cli("runs", "list", "--json", home=home).stdout)}
    assert rows["r0001-arith-a-s0"]["engine_holds_home"] is False
    assert rows["r0001-arith-a-s0"]["last_event_at"] > 0
    assert "engine_holds_home" not in rows["r0002-arith-a-s1"]          # a finished run needs no engine
    with EngineLock(Home.open(str(home))):                               # an engine holds the home: no warning
        proc = cli("runs", "list", home=home)
        assert proc.returncode == 0 and "no engine" not in proc.stderr, proc.stderr
        rows = {r["id"]: r for r in json.loads(cli("runs", "list", "--json", home=home).stdout)}
        assert rows["r0001-arith-a-s0"]["engine_holds_home"] is True


def test_runs_list_pages_with_limit_and_offset_and_refuses_a_bad_page(home_with_runs):
    everything = [r["id"] for r in json.loads(cli("runs", "list", "--json", home=home_with_runs, check=True).stdout)]
    assert len(everything) == len(IDS) >= 3
    first = json.loads(cli("runs", "list", "--json", "--limit", "2", home=home_with_runs, check=True).stdout)
    second = json.loads(cli("runs", "list", "--json", "--limit", "2", "--offset", "2", home=home_with_runs,
                            check=True).stdout)
    assert [r["id"] for r in first] + [r["id"] for r in second] == everything[:4]
    for bad in (["--limit", "0"], ["--offset", "2"], ["--limit", "2", "--offset", "-1"]):
        assert_clean_error(cli("runs", "list", *bad, home=home_with_runs), "--limit", "--offset")
