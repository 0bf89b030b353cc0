"""Snapshot size accounting (issue 24, breach 7): a sparse file counts at its apparent size, the cap
is relative to the base model's size, and a folder over it is refused before anything is copied."""

import os
import shutil
from pathlib import Path

import pytest

from autorl_tui.grading_host.submissions import (MIN_SNAPSHOT_CAP_BYTES, SubmissionRejected, check_snapshot_size,
                                           folder_bytes, snapshot_cap, snapshot_folder)

GiB = 1024**3


def _model(folder: Path, weights: int = 4096) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(os.urandom(weights))
    return folder


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as fh:
        fh.truncate(size)
        fh.write(b"x" * 4096)


def test_a_sparse_file_counts_at_its_apparent_size(tmp_path):
    folder = _model(tmp_path / "v1")
    _sparse(folder / "padding.bin", 3 * GiB)
    apparent, allocated = folder_bytes(folder)
    assert apparent >= 3 * GiB
    assert allocated < 64 * 1024**2      # the disk holds a few blocks
    with pytest.raises(SubmissionRejected) as err:
        check_snapshot_size(folder, snapshot_cap(10 * 1024**2), 10 * 1024**2)
    msg = str(err.value)
    assert err.value.code == "too_large"
    assert "3.0 GiB" in msg and "sparse" in msg and "1.0 GiB" in msg and "4 x the base model's 10.0 MiB" in msg


def test_the_cap_is_relative_to_the_base_model_with_a_floor():
    assert snapshot_cap(1024) == MIN_SNAPSHOT_CAP_BYTES
    assert snapshot_cap(2 * GiB) == 8 * GiB
    assert snapshot_cap(2 * GiB, 1.5) == 3 * GiB


def test_a_folder_within_the_cap_is_copied_and_one_that_grows_past_it_is_refused(tmp_path):
    folder = _model(tmp_path / "v1", weights=8192)
    check_snapshot_size(folder, 1 << 20, 4096)
    snap = snapshot_folder(folder, tmp_path / "snap" / "001", 1 << 20)
    assert snap.total_bytes == folder_bytes(folder)[0] and (snap.path / "model.safetensors").exists()
    with pytest.raises(SubmissionRejected) as err:
        snapshot_folder(folder, tmp_path / "snap" / "002", 4096)
    assert err.value.code == "too_large"
    assert not (tmp_path / "snap" / "002").exists() and not (tmp_path / "snap" / "002.partial").exists()
    shutil.rmtree(tmp_path / "snap")


def test_the_copy_opens_a_fifo_without_blocking_and_refuses_it(tmp_path):
    """A FIFO swapped in after the folder was listed (the listing refuses FIFOs): the open used by
    the copy returns at once and refuses it."""
    from autorl_tui.grading_host.submitted_folder import hold_folder

    folder = _model(tmp_path / "v1")
    with hold_folder(folder) as held:
        os.unlink(folder / "model.safetensors")
        os.mkfifo(folder / "model.safetensors")
        with pytest.raises(SubmissionRejected) as err:
            held.open_file("model.safetensors")
        assert err.value.code == "not_a_file"
        fd = held.open_file("config.json")
        assert os.read(fd, 10) == b"{}"
        os.close(fd)
    with pytest.raises(SubmissionRejected) as listed:
        hold_folder(folder)
    assert listed.value.code == "not_a_file"
