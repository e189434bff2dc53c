"""``--overwrite`` of an ``--out`` whose ``checkpoints`` links to another disk, with
``--init-from`` naming a checkpoint through (or on) that disk: --overwrite empties the link's
folder, so it deletes the source as it would one inside --out, and is refused alike. The check
compared the source's real path with --out's alone, so the run's weights were deleted and the
start then failed on the missing file."""

from __future__ import annotations

from pathlib import Path

import pytest

from distconv.checkpoint import CheckpointError
from distconv.job import TrainConfig, train
from distconv.refused_starts import init_from_refused_in
from tests.test_init_from import SETTINGS, first_run

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("named", ["through the link", "on the disk"])
def test_overwrite_of_an_out_whose_linked_checkpoints_hold_the_source_is_refused(tmp_path, named):
    out, disk = tmp_path / "a", tmp_path / "disk"
    disk.mkdir()
    out.mkdir()
    (out / "checkpoints").symlink_to(disk)
    source = first_run(out)  # out/checkpoints/step-N/chief.safetensors, on the disk
    path = source.parent if named == "through the link" else disk / source.parent.name
    before = sorted(p.name for p in disk.iterdir())
    config = TrainConfig(**SETTINGS, out=str(out), init_from=str(path), resume="overwrite")
    with pytest.raises(CheckpointError) as refused:
        train(config)
    said = str(refused.value)
    assert said == (
        f"--init-from {path} lies in --out {out}, which --overwrite deletes: start the new run "
        "in another --out"
    )
    assert sorted(p.name for p in disk.iterdir()) == before  # nothing deleted
    line = f"distconv train: error: {said}"
    assert init_from_refused_in([line]) == "--overwrite would delete the --init-from checkpoint"


def test_a_source_through_the_link_of_an_out_that_holds_a_run_is_told_another_out(
    tmp_path: Path,
):
    """The refusal of an --out that holds a run adds the way on where that run holds the
    source: also where its checkpoints are on another disk."""
    out, disk = tmp_path / "a", tmp_path / "disk"
    disk.mkdir()
    out.mkdir()
    (out / "checkpoints").symlink_to(disk)
    source = first_run(out)
    with pytest.raises(CheckpointError) as refused:
        train(TrainConfig(**SETTINGS, out=str(out), init_from=str(disk / source.parent.name)))
    assert "to start a new run from --init-from's weights, which lie in it, pass another --out" in (
        str(refused.value)
    )


def test_overwrite_of_an_out_whose_checkpoints_link_loops_names_the_loop(tmp_path: Path):
    """The check followed the link with Path.resolve, which raised RuntimeError on a loop of
    links (Python 3.11): a traceback where --overwrite alone names the loop."""
    source = first_run(tmp_path / "src")
    out = tmp_path / "a"
    out.mkdir()
    (out / "checkpoints").symlink_to("loop")
    (out / "loop").symlink_to("checkpoints")
    config = TrainConfig(**SETTINGS, out=str(out), init_from=str(source), resume="overwrite")
    with pytest.raises(CheckpointError, match=r"links to loop, which cannot be followed \(a loop"):
        train(config)
