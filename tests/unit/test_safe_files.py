"""The primitives the harness uses on agent-writable paths: no link followed, no blocking open,
regular files only, bounded reads, writes that replace a planted link instead of writing through it."""

import os
import threading

import pytest

from autorl_tui.safe_files import FileTooLarge, UnsafeFile, open_regular, read_regular, write_replace


def test_read_regular_reads_a_plain_file(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "m.jsonl").write_bytes(b"abc\n")
    assert read_regular(tmp_path, "logs/m.jsonl", 100) == b"abc\n"
    assert read_regular(tmp_path, tmp_path / "logs" / "m.jsonl", 100, offset=1) == b"bc\n"


def test_symlinked_file_and_folder_are_refused(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("held-out")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "link").symlink_to(secret)
    (ws / "dirlink").symlink_to(tmp_path)
    with pytest.raises(UnsafeFile):
        read_regular(ws, "link", 100)
    with pytest.raises(UnsafeFile):
        read_regular(ws, "dirlink/secret.txt", 100)
    with pytest.raises(UnsafeFile):
        read_regular(ws, "../secret.txt", 100)


def test_fifo_and_device_are_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo")   # nobody writes: a blocking open would hang forever
    (tmp_path / "zero").symlink_to("/dev/zero")
    done = threading.Event()

    def attempt():
        with pytest.raises(UnsafeFile):
            open_regular(tmp_path, "fifo")
        done.set()

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    assert done.wait(30), "opening a FIFO blocked"
    with pytest.raises(UnsafeFile):
        read_regular(tmp_path, "zero", 100)


def test_bounded_read_of_a_large_file(tmp_path):
    with open(tmp_path / "big", "wb") as fh:
        fh.truncate(10 * 1024 * 1024)   # sparse: 10 MiB apparent
    with pytest.raises(FileTooLarge):
        read_regular(tmp_path, "big", 1024)
    assert len(read_regular(tmp_path, "big", 1024, offset=4096)) == 1024


def test_write_replace_never_writes_through_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    mode_before = victim.stat().st_mode
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "run_meta.json").symlink_to(victim)
    (ws / "run_meta.json.tmp").symlink_to(victim)   # the fixed temp name an attacker would guess
    write_replace(ws, "run_meta.json", b"{}\n")
    assert victim.read_text() == "precious" and victim.stat().st_mode == mode_before
    assert not (ws / "run_meta.json").is_symlink()
    assert (ws / "run_meta.json").read_bytes() == b"{}\n"
    assert (ws / "run_meta.json").stat().st_mode & 0o777 == 0o444
    assert [p.name for p in ws.iterdir() if p.name.startswith(".run_meta")] == []
