"""A run directory whose ``checkpoints`` links to a disk not mounted yet (a replacement node's
mount late) is named as such where a resume meets it: ``--resume auto`` said the run ``holds
files that no distconv run without one leaves (runs/x/checkpoints)`` and ``--resume`` said
``no complete checkpoint``, words a launcher reads as a refusal every attempt meets. Nothing is
deleted, and the link stays for the disk's mount."""

from __future__ import annotations

import re

import pytest

from distconv.run_dir import RunDirError
from tests.test_resume_checks import _trainer


@pytest.mark.timeout(60)
@pytest.mark.parametrize("resume", ["auto", True])
def test_a_checkpoints_link_to_a_disk_not_there_is_named_so(data, tmp_path, resume):
    train, test = data
    out, disk = tmp_path / "run", tmp_path / "disk" / "c"
    out.mkdir()
    (out / "checkpoints").symlink_to(disk)
    (out / "metrics.jsonl").write_text('{"epoch": 1, "step": 15}\n{"epoch": 2, "step": 30}\n')
    said = f"{out / 'checkpoints'} links to {disk}, which is not there (a disk not mounted yet?)"
    with pytest.raises(RunDirError, match=re.escape(said)):
        _trainer(out).fit(train, test, epochs=1, resume=resume)
    assert (out / "checkpoints").is_symlink() and not (tmp_path / "disk").exists()
    assert (out / "metrics.jsonl").read_text().count("\n") == 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize("resume", ["auto", True])
def test_a_checkpoints_link_to_an_empty_mount_point_is_named_so(data, tmp_path, resume):
    """The disk's mount point left as an empty folder, a run whose metrics show it wrote
    checkpoints (epochs past the first) says so, not that it holds files no run leaves or has no
    complete checkpoint: those are refused for good."""
    train, test = data
    out, mount = tmp_path / "run", tmp_path / "mnt"
    out.mkdir(), mount.mkdir()
    (out / "checkpoints").symlink_to(mount)
    (out / "metrics.jsonl").write_text('{"epoch": 1, "step": 15}\n{"epoch": 2, "step": 30}\n')
    said = f"{out / 'checkpoints'} links to {mount}, which is empty though the run's metrics show"
    with pytest.raises(RunDirError, match=re.escape(said)):
        _trainer(out).fit(train, test, epochs=1, resume=resume)
    assert (out / "checkpoints").is_symlink() and not any(mount.iterdir())
    assert (out / "metrics.jsonl").read_text().count("\n") == 2


@pytest.mark.timeout(60)
def test_an_empty_linked_folder_of_a_run_cut_short_in_its_first_epoch_starts_afresh(data, tmp_path):
    """A run whose metrics show no checkpoint (its first epoch's line at most) and whose linked
    folder is empty is no late mount: ``--resume auto`` starts it afresh as before."""
    train, test = data
    out, mount = tmp_path / "run", tmp_path / "mnt"
    out.mkdir(), mount.mkdir()
    (out / "checkpoints").symlink_to(mount)
    (out / "metrics.jsonl").write_text('{"epoch": 1, "step": 15}\n')
    _trainer(out).fit(train, test, epochs=1, resume="auto")
    assert any(mount.iterdir())


@pytest.mark.timeout(60)
def test_a_checkpoints_link_in_a_loop_is_named_so_not_a_disk_not_mounted(data, tmp_path):
    """A link that leads back to itself is no disk not mounted yet: said so."""
    train, test = data
    out = tmp_path / "run"
    out.mkdir()
    (out / "checkpoints").symlink_to(out / "checkpoints")
    said = f"{out / 'checkpoints'} links to {out / 'checkpoints'}, which cannot be followed"
    with pytest.raises(RunDirError, match=re.escape(said) + r" \(a loop of links\)$"):
        _trainer(out).fit(train, test, epochs=1, resume="auto")
