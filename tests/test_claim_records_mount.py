"""A run cut short in its first epoch leaves no metrics that tell a late disk's empty mount
point from an empty folder: its restart started afresh on the folder beneath the mount point,
which the disk, once mounted, hid. The run's claim records the mount point its ``checkpoints``
linked to when it began, and a start that finds it no mount point says so, in the words a
launcher restarts. A real tmpfs mounted in a mount namespace of the first start's own
(``unshare``), gone with it; skipped where this system lets no user make one."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from tests.child_env import child_env, child_path
from tests.mounts import needs_mounts
from tests.processes import run_job

SMALL = ("--data", "synthetic", "--batch-size", "32", "--no-progress", "--epochs", "1")
#: the first start dies (SIGKILL) at step 3 of its first epoch's 12, no checkpoint written
DIE_AT_STEP_3 = """
import os, signal
if os.environ.get("DIE_AT_STEP_3"):
    from distconv import trainer
    step = trainer.Trainer.train_step
    def dying(self, *args, **kwargs):
        if self.pos.step == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        return step(self, *args, **kwargs)
    trainer.Trainer.train_step = dying
"""
#: ``unshare ... sh -c MOUNT sh ARGV``: ARGV run with a tmpfs on ``$MNT``, in a mount namespace
#: (and a user namespace, for a user who is not root) of its own
MOUNT = 'mount -t tmpfs distconv-test "$MNT" && exec "$@"'


@pytest.mark.timeout(60)
@needs_mounts
def test_a_run_cut_short_on_a_mounted_disk_is_not_started_afresh_beneath_its_mount_point(
    tmp_path,
):
    inject, out, mnt = tmp_path / "inject", tmp_path / "run", tmp_path / "mnt"
    for folder in (inject, out, mnt):
        folder.mkdir()
    (inject / "sitecustomize.py").write_text(DIE_AT_STEP_3)
    (out / "checkpoints").symlink_to(mnt)
    train = [sys.executable, "-m", "distconv", "train", *SMALL, "--out", str(out)]
    env = child_env(DIE_AT_STEP_3="1", MNT=str(mnt))
    env["PYTHONPATH"] = child_path(inject)
    first = run_job(["unshare", "-rm", "sh", "-c", MOUNT, "sh", *train], env=env, timeout=30)
    assert first.returncode == -9, first.stdout + first.stderr  # SIGKILLed, in its first epoch
    claim = json.loads((out / "run.claim").read_text())
    assert claim["checkpoints_mount"] == os.path.realpath(mnt)
    assert not os.path.ismount(mnt) and not any(mnt.iterdir())  # its namespace gone, the disk too
    done = run_job([*train, "--resume", "auto"], env=child_env(), timeout=30)
    said = done.stdout + done.stderr
    words = "which was a mount point when the run began and is none now (a disk not mounted yet?)"
    assert done.returncode == 1, said[-3000:]
    assert f"error: {out / 'checkpoints'} links to {mnt}, {words}\n" in said, said[-3000:]
    assert not any(mnt.iterdir())  # no checkpoint beneath the mount point
    metrics = out / "metrics.jsonl"
    assert not metrics.exists() or metrics.read_text() == ""  # no epoch ran
    assert json.loads((out / "run.claim").read_text()) == claim  # kept for the next attempt


#: as :data:`MOUNT`, and once ARGV is done the disk's files are kept in ``$KEEP``, as a copy of
#: the run (another machine's, or the disk mounted higher up) would find them
MOUNT_AND_KEEP = 'mount -t tmpfs distconv-test "$MNT" && "$@" && cp -a "$MNT/." "$KEEP/"'


@pytest.mark.timeout(60)
@needs_mounts
def test_a_recorded_mount_point_holding_the_runs_checkpoints_resumes(tmp_path):
    """The record tells an empty folder from a mount point with no disk on it; a folder that
    holds the run's checkpoints (the run copied to a machine where that path is a plain folder,
    or the disk mounted at a folder above it) is no disk not mounted: it resumes, where it was
    refused as one and restarted on every attempt."""
    out, mnt, keep = tmp_path / "run", tmp_path / "mnt", tmp_path / "keep"
    for folder in (out, mnt, keep):
        folder.mkdir()
    (out / "checkpoints").symlink_to(mnt)
    train = [sys.executable, "-m", "distconv", "train", *SMALL, "--out", str(out)]
    env = child_env(MNT=str(mnt), KEEP=str(keep))
    first = run_job(
        ["unshare", "-rm", "sh", "-c", MOUNT_AND_KEEP, "sh", *train], env=env, timeout=30
    )
    assert first.returncode == 0, first.stdout + first.stderr
    assert json.loads((out / "run.claim").read_text())["checkpoints_mount"] == os.path.realpath(mnt)
    shutil.copytree(keep, mnt, dirs_exist_ok=True)  # the same path, no mount point now
    assert not os.path.ismount(mnt) and (mnt / "step-00000012.json").is_file()
    done = run_job([*train, "--resume", "auto", "--epochs", "2"], env=child_env(), timeout=30)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "resumed from" in said and "step 12" in said, said[-3000:]
    assert (mnt / "step-00000024.json").is_file()
    assert [r["epoch"] for r in map(json.loads, (out / "metrics.jsonl").open())] == [1, 2]
