"""What ``--init-from PATH`` takes as a checkpoint: a run's ``checkpoints`` folder names its
newest, as the run's ``--out`` does, and was refused as holding no complete checkpoint; a
parameter-server shard's part is refused as one, naming the checkpoint to pass instead."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from distconv.checkpoint import CheckpointError, load_checkpoint
from distconv.init_from import load_weights
from distconv.models import lenet
from distconv.refused_starts import init_from_refused_in, refused_for_good_in
from distconv.source_words import INIT_FROM_FLAG
from tests.launcher.conftest import own_home  # noqa: F401  (its launches' HOME: their own)
from tests.launcher.launch_cli import launch
from tests.launcher.test_init_from_restarts import SHARDED, TRAIN
from tests.test_init_from import first_run

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("own_home")]


def test_the_checkpoints_folder_itself_names_its_newest(tmp_path):
    """``RUN/checkpoints``, and the folder moved off the run (a disk of its own), alike."""
    source = first_run(tmp_path / "a")
    moved, saved = tmp_path / "disk", load_checkpoint(source).params
    shutil.copytree(tmp_path / "a" / "checkpoints", moved)
    for folder in (tmp_path / "a" / "checkpoints", moved):
        params = lenet((1, 8, 8), 4).parameters()  # float32: the float64 weights cast
        assert load_weights(folder, params).path == folder / source.relative_to(source.parents[1])
        assert all(np.array_equal(p.value, saved[p.name].astype(p.value.dtype)) for p in params)


def test_a_shard_part_is_refused_naming_the_chief_s_checkpoint(tmp_path):
    """A real parameter-server run's shard part (``pserver-shard0-steplast.safetensors``, at the
    top of its --out under distconv-launch local) holds that shard's blocks, not the model's
    weights: it was refused as "damaged", with "an older checkpoints/step-N folder" the way
    out, and the launcher restarted the job for it."""
    out = tmp_path / "ps"
    done = launch(*SHARDED, "--run-dir", str(tmp_path / "job"), "--", *TRAIN, "--out", str(out),
                  cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    part = out / "pserver-shard0-steplast.safetensors"
    with pytest.raises(CheckpointError) as refused:
        load_weights(part, lenet((1, 8, 8), 4).parameters(), words=INIT_FROM_FLAG)
    said = str(refused.value)
    assert said == (
        f"--init-from {part}: a parameter-server shard's checkpoint part, which holds that "
        "shard's blocks, not the model's weights; pass its run's --out or one of its "
        "checkpoints/step-N folders, whose chief's part holds every weight"
    )
    line = f"distconv train: error: {said}"
    assert init_from_refused_in([line]) == "the --init-from path is a parameter-server shard's part"


def test_a_run_whose_checkpoints_disk_is_not_mounted_is_said_so_and_restarted(tmp_path):
    """A run whose ``checkpoints`` links to a disk not mounted yet was refused as holding no
    checkpoint, a refusal the launcher restarts none for, where a resume of that run names the
    link and is restarted, the disk perhaps mounted by then: --init-from now says the same."""
    out = tmp_path / "a"
    first_run(out)
    shutil.move(out / "checkpoints", tmp_path / "disk")
    (out / "checkpoints").symlink_to(tmp_path / "gone")
    with pytest.raises(CheckpointError) as refused:
        load_weights(out, lenet((1, 8, 8), 4).parameters(), words=INIT_FROM_FLAG)
    said = str(refused.value)
    assert said == (
        f"--init-from {out}: {out / 'checkpoints'} links to {tmp_path / 'gone'}, which is not "
        "there (a disk not mounted yet?)"
    )
    line = f"distconv train: error: {said}"
    assert init_from_refused_in([line]) is None and refused_for_good_in([line]) is None


@pytest.mark.parametrize("named", ["checkpoints", "checkpoints/step-00000024"])
def test_the_checkpoints_folder_on_a_disk_not_mounted_is_said_so_and_restarted(tmp_path, named):
    """``RUN/checkpoints`` named itself, or a step folder in it, where it links to a disk not
    mounted yet, was refused for good as "no such file or folder", though ``RUN`` was named
    the disk and restarted: the same disk, the same words now."""
    out = tmp_path / "a"
    first_run(out)
    shutil.move(out / "checkpoints", tmp_path / "disk")
    (out / "checkpoints").symlink_to(tmp_path / "gone")
    source = out / named
    with pytest.raises(CheckpointError) as refused:
        load_weights(source, lenet((1, 8, 8), 4).parameters(), words=INIT_FROM_FLAG)
    said = str(refused.value)
    assert said == (
        f"--init-from {source}: {out / 'checkpoints'} links to {tmp_path / 'gone'}, which is "
        "not there (a disk not mounted yet?)"
    )
    line = f"distconv train: error: {said}"
    assert init_from_refused_in([line]) is None and refused_for_good_in([line]) is None


@pytest.mark.parametrize("named", ["checkpoints", "checkpoints/step-00000024"])
def test_the_checkpoints_folder_linked_to_an_empty_mount_point_is_said_so(tmp_path, named):
    """``RUN/checkpoints`` linked to an empty folder (the mount point, its disk not on it) of a
    run whose metrics show it wrote checkpoints: refused for good as holding no checkpoint,
    where ``RUN`` itself is named the disk, and restarted. A step folder in it was refused
    for good as "no such file or folder", though the docs name it among the forms restarted."""
    out, empty = tmp_path / "a", tmp_path / "mount"
    first_run(out)
    shutil.move(out / "checkpoints", tmp_path / "disk")
    empty.mkdir()
    (out / "checkpoints").symlink_to(empty)
    with pytest.raises(CheckpointError) as refused:
        load_weights(out / named, lenet((1, 8, 8), 4).parameters(), words=INIT_FROM_FLAG)
    said = str(refused.value)
    assert said == (
        f"--init-from {out / named}: {out / 'checkpoints'} links to {empty}, which is empty "
        "though the run's metrics show it wrote checkpoints (a disk not mounted yet?)"
    )
    line = f"distconv train: error: {said}"
    assert init_from_refused_in([line]) is None and refused_for_good_in([line]) is None
