"""Issue 31, breaches 2 and 3: links at or inside a submitted folder, and the file/link flip race.

The intake under test is the desk's own (`engine.submissions.take_submission`, what
`SubmissionDesk._intake` runs in a thread). The secrets are real files outside the workspace: a
root-only file, a held-out split, a store and another run's snapshot."""

import os
import threading

import pytest

from autorl_tui.grading_host.submissions import BLOBS, SubmissionRejected, snapshot_folder, take_submission

SECRET = b"ROOT-ONLY SECRET 4b1d"
SPLIT = b'{"id": "test-0001", "prompt": "held-out item"}\n'
STORE = b"SQLite format 3\0stands in for store.db"


def _model(folder, weights=b"w" * 4096):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "tokenizer.json").write_text("{}")
    return folder


@pytest.fixture
def host(tmp_path):
    """A workspace, the run's snapshot folder and the host files an agent must never get copied."""
    ws = tmp_path / "work" / "ws"
    (ws / "output").mkdir(parents=True)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    secret = private / "root-only"
    secret.write_bytes(SECRET)
    os.chmod(secret, 0o600)
    split = private / "test.jsonl"
    split.write_bytes(SPLIT)
    store = private / "store.db"
    store.write_bytes(STORE)
    return {"ws": ws, "secret": secret, "split": split, "store": store, "snaps": tmp_path / "snapshots" / "r2"}


def _take(host, model_path, seq=1):
    return take_submission(host["ws"], model_path, host["snaps"] / f"{seq:03d}", 1 << 30, 1 << 20)


def _copied_anything(host) -> bool:
    snaps = host["snaps"]
    return snaps.exists() and any(p.is_file() for p in snaps.rglob("*") if p.name != ".statcache.json")


def _leaks(host) -> bool:
    """Any file under the snapshots holding a secret's bytes."""
    if not host["snaps"].exists():
        return False
    for p in host["snaps"].rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            if SECRET in data or SPLIT in data or STORE in data:
                return True
    return False


def test_output_replaced_by_a_link_to_root_is_refused_and_nothing_is_copied(host):
    """`mv output output.real; ln -s / output`, then submit output/<ws path>/output.real/v1 whose
    files are links to a root-only file, a held-out split and the store."""
    ws = host["ws"]
    v1 = _model(ws / "output" / "v1")
    for name, target in (("model.safetensors", host["secret"]), ("test.jsonl", host["split"]),
                         ("store.db", host["store"])):
        (v1 / name).unlink(missing_ok=True)
        (v1 / name).symlink_to(target)
    (ws / "output").rename(ws / "output.real")
    (ws / "output").symlink_to("/")
    through_root = f"output/{str(ws).lstrip('/')}/output.real/v1"
    answers = []
    for model_path in (through_root, f"{ws}/{through_root}", "output/" + str(host["secret"]).lstrip("/"),
                       "output/" + str(host["snaps"].parent).lstrip("/") + "/no-such-folder"):
        with pytest.raises(SubmissionRejected) as err:
            _take(host, model_path)
        answers.append((err.value.code, str(err.value)))
    assert {code for code, _ in answers} == {"symlink_out"}
    # one answer whatever lies behind the link: no existence or size oracle for host paths
    assert len({msg for _, msg in answers}) == 1, answers
    msg = answers[0][1]
    assert str(host["secret"].parent) not in msg and str(ws) not in msg and "output/ is a symbolic link" in msg
    assert not _copied_anything(host) and not _leaks(host)


def test_links_inside_a_real_output_folder_are_refused_without_naming_their_target(host):
    ws = host["ws"]
    v1 = _model(ws / "output" / "v1")
    (v1 / "model.safetensors").unlink()
    (v1 / "model.safetensors").symlink_to(host["secret"])
    with pytest.raises(SubmissionRejected) as err:
        _take(host, "output/v1")
    assert err.value.code == "symlink_out" and "output/v1/model.safetensors is a symbolic link" in str(err.value)
    assert str(host["secret"]) not in str(err.value)
    # a link to a file inside output/ is refused too: a link anywhere is a refusal
    (v1 / "model.safetensors").unlink()
    (v1 / "weights.bin").write_bytes(b"w" * 4096)
    (v1 / "model.safetensors").symlink_to("weights.bin")
    with pytest.raises(SubmissionRejected):
        _take(host, "output/v1")
    # a linked sub-folder: refused at the folder
    (v1 / "model.safetensors").unlink()
    (v1 / "model.safetensors").write_bytes(b"w" * 4096)
    (v1 / "data").symlink_to(host["split"].parent)
    with pytest.raises(SubmissionRejected) as sub:
        _take(host, "output/v1")
    assert "output/v1/data is a symbolic link" in str(sub.value)
    assert not _copied_anything(host) and not _leaks(host)
    (v1 / "data").unlink()
    snap = _take(host, "output/v1")                        # the same folder without links is taken
    assert snap.n_files == 4 and (snap.path / "weights.bin").read_bytes() == b"w" * 4096


def test_another_runs_snapshot_submitted_through_a_link_is_refused(host, tmp_path):
    other = snapshot_folder(_model(tmp_path / "other-run-output", b"theirs" * 1000),
                            tmp_path / "snapshots" / "r1" / "001", 1 << 30)
    ws = host["ws"]
    (ws / "output" / "v2").symlink_to(other.path)                       # the folder itself
    (ws / "output" / "v3").mkdir()
    (ws / "output" / "v3" / "model").symlink_to(other.path)             # a folder inside it
    (ws / "output" / "v4").mkdir()
    for name in os.listdir(other.path):                                 # each file
        (ws / "output" / "v4" / name).symlink_to(other.path / name)
    for model_path in ("output/v2", "output/v3/model", "output/v4"):
        with pytest.raises(SubmissionRejected) as err:
            _take(host, model_path)
        assert err.value.code == "symlink_out" and str(other.path) not in str(err.value)
    assert not _copied_anything(host)


def _flipper(path, target, stop):
    """Flip path between a regular file and a link to target, each step one atomic rename."""
    regular, link = path.with_name(".flip-file"), path.with_name(".flip-link")
    flips = 0
    while not stop.is_set():
        regular.write_bytes(b"w" * 4096)
        os.replace(regular, path)
        stop.wait(0.0005)                      # each state lasts about as long as the other
        link.symlink_to(target)
        os.replace(link, path)
        stop.wait(0.0005)
        flips += 1
    regular.write_bytes(b"w" * 4096)
    os.replace(regular, path)
    return flips


@pytest.mark.parametrize("what", ["file", "folder"])
def test_the_file_link_flip_during_submission_never_copies_the_link_target(host, what):
    """A thread flips a regular file (or the submitted folder) and a link to a root-only file (or a
    folder of secrets) while the desk's intake runs, many times: every try is refused or copies the
    regular file; the secret's bytes are never in the snapshots."""
    ws = host["ws"]
    v1 = _model(ws / "output" / "v1")
    if what == "file":
        path, target = v1 / "model.safetensors", host["secret"]
    else:
        decoy = host["secret"].parent / "v1"
        _model(decoy, SECRET * 200)
        path, target = ws / "output" / "cur", decoy
    stop = threading.Event()
    if what == "file":
        flipper = threading.Thread(target=_flipper, args=(path, target, stop))
    else:
        flipper = threading.Thread(target=_flip_folder, args=(v1, path, target, stop))
    flipper.start()
    taken = refused = 0
    try:
        for seq in range(1, 301):
            try:
                snap = _take(host, "output/v1" if what == "file" else "output/cur", seq)
            except SubmissionRejected as exc:
                assert exc.code in ("symlink_out", "not_a_file", "missing"), exc
                assert str(target) not in str(exc)
                refused += 1
            else:
                assert (snap.path / "model.safetensors").read_bytes() == b"w" * 4096
                taken += 1
    finally:
        stop.set()
        flipper.join()
    assert not _leaks(host)
    assert refused > 0 and taken + refused == 300
    assert not list((host["snaps"] / BLOBS).rglob(".incoming-*"))


def _flip_folder(real, path, target, stop):
    """The submitted name is in turn the real folder (renamed in), absent, and a link to a folder
    of secrets: the submitted folder itself changes under the intake."""
    while not stop.is_set():
        os.rename(real, path)
        stop.wait(0.001)
        os.rename(path, real)
        path.symlink_to(target)
        stop.wait(0.001)
        path.unlink()
