"""A start without ``--resume``, or with ``--overwrite``, into a run directory whose
``checkpoints`` links to nothing (a disk not mounted yet) or to itself (a loop) says so before
any training step, in the words a resume says it in: it met the link only at its first
checkpoint's save, after an epoch of work that was lost, and each restart lost another. Nothing
is deleted, the link stays, and no plain folder is made in its place: the disk's run is there
once it is mounted. Real ``python3 -m distconv train`` processes on real links."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from tests.child_env import child_env
from tests.processes import run_job

SMALL = ("--data", "synthetic", "--batch-size", "32", "--no-progress", "--epochs", "1")
#: an earlier run's metrics: what ``--overwrite`` would delete
EARLIER = '{"epoch": 1, "step": 12}\n{"epoch": 2, "step": 24}\n'


def train(out: Path, *flags: str, status: int = 1) -> str:
    """``distconv train`` into ``out`` with ``flags``, which must exit ``status`` (fail, where
    not given): its output."""
    argv = [sys.executable, "-m", "distconv", "train", *SMALL, "--out", str(out), *flags]
    done = run_job(argv, env=child_env(), timeout=30)
    said = done.stdout + done.stderr
    assert done.returncode == status, said[-3000:]
    return said


def linked(tmp_path: Path, to: str) -> tuple[Path, Path]:
    """A run directory whose ``checkpoints`` links to a disk not there (``to="gone"``) or to
    itself (``"loop"``), and the link's target."""
    out = tmp_path / "run"
    out.mkdir()
    target = tmp_path / "disk" / "c" if to == "gone" else out / "checkpoints"
    (out / "checkpoints").symlink_to(target)
    return out, target


WORDS = {
    "gone": "which is not there (a disk not mounted yet?)",
    "loop": "which cannot be followed (a loop of links)",
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("to", ["gone", "loop"])
@pytest.mark.parametrize("flags", [(), ("--overwrite",)], ids=["fresh", "overwrite"])
def test_a_start_into_a_checkpoints_link_to_nothing_says_so_before_training(tmp_path, to, flags):
    out, target = linked(tmp_path, to)
    said = train(out, *flags)
    assert f"error: {out / 'checkpoints'} links to {target}, {WORDS[to]}\n" in said, said[-3000:]
    assert not (out / "metrics.jsonl").exists()  # no epoch's line: none ran
    assert not (out / "run.claim").exists()  # no run begun: a restart starts it as the first
    assert (out / "checkpoints").is_symlink() and not (tmp_path / "disk").exists()


@pytest.mark.timeout(60)
def test_overwrite_deletes_nothing_of_a_run_whose_checkpoints_disk_is_not_there(tmp_path):
    """``--overwrite`` over an earlier run whose checkpoints are on a disk not mounted keeps
    all of it: clearing the metrics and claim now would leave that run's checkpoints on the
    disk, beside the new run's, once it is mounted; the restart that finds it clears both."""
    out, target = linked(tmp_path, "gone")
    (out / "metrics.jsonl").write_text(EARLIER)
    (out / "run.claim").write_text('{"job": null, "launch": null}')
    said = train(out, "--overwrite")
    assert f"{out / 'checkpoints'} links to {target}, {WORDS['gone']}" in said, said[-3000:]
    assert (out / "metrics.jsonl").read_text() == EARLIER
    assert (out / "run.claim").read_text() == '{"job": null, "launch": null}'
    assert (out / "checkpoints").is_symlink() and not (tmp_path / "disk").exists()


def trained(out: Path, *flags: str) -> str:
    """``distconv train`` into ``out`` with ``flags``, which must succeed: its output."""
    return train(out, *flags, status=0)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["emptied", "re-pointed"])
def test_overwrite_replaces_a_run_whose_linked_checkpoints_folder_is_empty(tmp_path, how):
    """``--overwrite`` of a run whose metrics show checkpoints, its ``checkpoints`` linked to an
    empty folder that is there: emptied by hand to free the disk, or, its disk gone, pointed at
    another folder as the operations guide says to replace it without that disk. The metrics'
    sign of a disk not mounted is a resume's: ``--overwrite`` deletes those metrics, and was
    refused (and restarted) on every attempt."""
    out, disk = tmp_path / "run", tmp_path / "disk"
    out.mkdir()
    disk.mkdir()
    (out / "checkpoints").symlink_to(disk)
    trained(out, "--epochs", "2")
    assert (disk / "step-00000024.json").is_file()
    if how == "emptied":
        for entry in disk.iterdir():
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    else:
        shutil.rmtree(disk)
        (tmp_path / "other").mkdir()
        (out / "checkpoints").unlink()
        (out / "checkpoints").symlink_to(tmp_path / "other")
    trained(out, "--overwrite")
    assert [r["epoch"] for r in map(json.loads, (out / "metrics.jsonl").open())] == [1]
    assert (out / "checkpoints" / "step-00000012.json").is_file()


@pytest.mark.timeout(60)
def test_a_fresh_start_beside_a_leftover_plot_and_an_emptied_folder_trains(tmp_path):
    """A start without ``--resume`` where an earlier run's metrics were deleted and its linked
    checkpoints folder emptied, its plot left: the plot read as the metrics' sign of checkpoints
    written, and the empty folder as a disk not mounted, refused and restarted on every
    attempt. A start with metrics is refused as a run there before it; without, no sign holds."""
    out, disk = tmp_path / "run", tmp_path / "disk"
    out.mkdir()
    disk.mkdir()
    (out / "checkpoints").symlink_to(disk)
    trained(out)
    for entry in disk.iterdir():
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    (out / "metrics.jsonl").unlink()
    assert (out / "metrics.png").is_file()
    trained(out)
    assert [r["epoch"] for r in map(json.loads, (out / "metrics.jsonl").open())] == [1]
