"""Step checkpoints in a run directory (``StepCheckpoints``, ``RunDirectory``).

A step checkpoint whose manifest cannot be written leaves no part behind (unless an earlier
manifest of its step names it). ``StepCheckpoints.restore`` restores a checkpoint that
``save_checkpoint`` wrote, which records no epoch sums. A manifest whose step is not a whole
number is damaged, named as such, and a ``keep`` that is not a count is refused."""

from __future__ import annotations

import errno
import os
import shutil

import numpy as np
import pytest

import distconv.files as files
from distconv.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.resume import Position, StepCheckpoints
from distconv.run_dir import RunDirectory
from distconv.sync import create_sync
from tests.small_disk import small_tmpfs


def _checkpoints(root, size=1000, facts=None):
    """A run's checkpoints of one parameter of ``size`` float64s, opened fresh; ``facts``: the
    run's (a seed of 0 alone by default)."""
    params = [Parameter("w", np.linspace(0.0, 1.0, size))]
    sync = create_sync("local", optimizer=create_optimizer("sgd", lr=0.1))
    sync.setup(params)
    facts = {"seed": 0} if facts is None else facts
    ckpts = StepCheckpoints(RunDirectory(root, keep=2), params, sync, facts)
    ckpts.open(False)
    return ckpts


def _full_at_manifests(path):
    """A write hook: the disk is full when a manifest is written."""
    if path.suffix == ".json":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_manifest_that_cannot_be_written_takes_its_steps_part_with_it(tmp_path, monkeypatch):
    """The part stayed: a checkpoint that is never resumed from, a checkpoint's worth of the
    disk that a full disk needs most (a retry of the save then needed room for two parts).
    Where no small file system can be mounted, the writer's own hook fails the manifest."""
    ckpts = _checkpoints(tmp_path)
    ckpts.save(Position(0, 1, 1), {})

    monkeypatch.setattr(files, "write_hook", _full_at_manifests)
    with pytest.raises(CheckpointError, match="manifest .* no space left on device"):
        ckpts.save(Position(0, 2, 2), {})
    assert not (ckpts.run.checkpoint_root / "step-00000002").exists()
    assert [m.step for m in ckpts.run.manifests()] == [1]
    ckpts.close()


def test_a_manifest_that_fails_keeps_the_part_an_earlier_manifest_of_its_step_names(
    tmp_path, monkeypatch
):
    """A step saved twice (a checkpoint every k steps, then the epoch's end at the same step):
    the part the first manifest names is a whole checkpoint and stays."""
    ckpts = _checkpoints(tmp_path)
    ckpts.save(Position(0, 2, 2), {})
    monkeypatch.setattr(files, "write_hook", _full_at_manifests)
    with pytest.raises(CheckpointError, match="no space left on device"):
        ckpts.save(Position(1, 2, 0), {})
    (manifest,) = ckpts.run.manifests()
    assert load_checkpoint(manifest.part("chief")).step == 2
    ckpts.close()


@pytest.mark.timeout(60)
def test_a_full_disk_at_the_manifest_leaves_room_for_the_saves_retry(tmp_path):
    """A real full disk: a small tmpfs (where this user may mount one)."""
    ckpts = None
    with small_tmpfs(tmp_path, "64k") as mount:
        try:
            ckpts = _checkpoints(mount / "run", size=2000)  # a part of 4 or 5 pages
            ckpts.save(Position(0, 1, 1), {})
            # the part's pages as written (its metadata grows as checkpoints record more)
            part = ckpts.run.latest().part("chief").stat().st_size
            room = -(-part // 4096) * 4096
            filler = mount / "filler"
            free = shutil.disk_usage(mount).free
            filler.write_bytes(b"x" * (free - room))  # room for a part, not for its manifest
            with pytest.raises(CheckpointError, match="no space left on device"):
                ckpts.save(Position(0, 2, 2), {})
            assert not (ckpts.run.checkpoint_root / "step-00000002").exists()
            filler.write_bytes(b"x" * (free - room - 4096))  # a page freed: the retry fits
            ckpts.save(Position(0, 2, 2), {})
            assert [m.step for m in ckpts.run.manifests()] == [1, 2]
        finally:
            if ckpts is not None:
                ckpts.close()


def test_a_checkpoint_saved_through_the_api_restores_at_its_step_with_no_sums(tmp_path):
    """``save_checkpoint`` records no epoch sums: restoring its file failed with a bare
    ``KeyError: 'sums'`` after the weights were already copied in."""
    path = tmp_path / "api.safetensors"
    save_checkpoint(path, [Parameter("w", np.array([1.5, -2.0]))], step=3, epoch=1)
    params = [Parameter("w", np.zeros(2))]
    sync = create_sync("local", optimizer=create_optimizer("sgd"))
    sync.setup(params)
    state, pos = StepCheckpoints(None, params, sync, {}).restore(path)
    assert (pos.epoch, pos.step, pos.step_in_epoch, pos.sums) == (1, 3, 0, {})
    assert state == {}
    np.testing.assert_array_equal(params[0].value, [1.5, -2.0])


@pytest.mark.parametrize("step", ["1e999", "2.5", "true", '"2"'])
def test_a_manifest_whose_step_is_not_an_int_is_reported_damaged_beside_good_ones(tmp_path, step):
    """``1e999`` (infinity to json) escaped the scan as an OverflowError, a traceback in place
    of "skipping a checkpoint"; 2.5 and true were taken as steps 2 and 1."""
    run = RunDirectory(tmp_path)
    for n in (1, 2):
        part = run.step_dir(n) / "chief.safetensors"
        save_checkpoint(part, [Parameter("w", np.zeros(2))], step=n)
        run.commit(n, {"chief": part})
    manifest = run.checkpoint_root / "step-00000002.json"
    manifest.write_text(manifest.read_text().replace('"step": 2', f'"step": {step}'))
    complete, problems = run.scan()
    assert [m.step for m in complete] == [1]
    (problem,) = problems
    assert problem.startswith(f"{manifest} is damaged (TypeError: ")


@pytest.mark.parametrize("keep", [2.5, True, "3", None])
def test_a_keep_that_is_not_a_count_is_refused_when_the_run_directory_is_made(tmp_path, keep):
    """2.5 (and True) were taken, and the first save's prune failed after its manifest was
    written ("slice indices must be integers"); "3" and None failed comparing with 1."""
    with pytest.raises(ValueError, match=r"keep must be an int >= 1, got"):
        RunDirectory(tmp_path, keep=keep)


def test_a_manifest_whose_step_is_not_its_names_is_damaged_and_prunes_nothing(tmp_path):
    """A manifest's step is what the scan sorts by: one wrong digit in an older manifest (a
    hand edit, a bit flip: manifests carry no checksum) made it the newest checkpoint for good,
    every resume went back to it silently, and each save's prune deleted the checkpoints that
    really were newer."""
    run = RunDirectory(tmp_path, keep=2)
    for n in (1, 2, 3):
        part = run.step_dir(n) / "chief.safetensors"
        save_checkpoint(part, [Parameter("w", np.full(2, float(n)))], step=n)
        run.commit(n, {"chief": part})
    manifest = run.checkpoint_root / "step-00000002.json"
    manifest.write_text(manifest.read_text().replace('"step": 2', '"step": 30000'))
    complete, problems = run.scan()
    assert [m.step for m in complete] == [3]
    assert problems == [f"{manifest} is damaged (ValueError: its step 30000 is not its name's 2)"]
    part = run.step_dir(4) / "chief.safetensors"
    save_checkpoint(part, [Parameter("w", np.full(2, 4.0))], step=4)
    run.commit(4, {"chief": part})
    assert [m.step for m in run.manifests()] == [3, 4]
