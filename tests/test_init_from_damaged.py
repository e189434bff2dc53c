"""``--init-from`` given a damaged checkpoint, a JSON file that is no checkpoint's manifest, or a
checkpoint of another format version: a refusal that names ``--init-from`` and the way on,
which the launcher reads as one that every attempt meets, not a traceback nor a line it
restarts for. Real runs' checkpoints, damaged (or rewritten) on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from distconv.checkpoint import CheckpointError
from distconv.job import TrainConfig, train
from distconv.refused_starts import init_from_refused_in, refused_for_good_in
from tests.test_init_from import SETTINGS, first_run

pytestmark = pytest.mark.timeout(120)


def refused(source: Path, out: Path, launcher_says: str) -> str:
    """The words ``distconv train --init-from source`` refuses to start with, checked to write
    no checkpoint and to be read by the launcher as a refusal no restart mends, which it says
    as ``launcher_says``."""
    with pytest.raises(CheckpointError) as refusal:
        train(TrainConfig(**SETTINGS, out=str(out), init_from=str(source)))
    said = str(refusal.value)
    assert init_from_refused_in([f"distconv train: error: {said}"]) == launcher_says, said
    assert not list(out.glob("checkpoints/step-*.json"))
    return said


def damage(file: Path) -> None:
    """Flip one byte of ``file``'s data: it fails its checksum."""
    raw = bytearray(file.read_bytes())
    raw[-100] ^= 0xFF
    file.write_bytes(bytes(raw))


def test_a_damaged_checkpoint_is_refused_naming_init_from_and_an_older_one(tmp_path):
    source = first_run(tmp_path / "a")
    damage(source)
    said = refused(tmp_path / "a", tmp_path / "b", "the --init-from checkpoint is damaged")
    assert said.startswith(f"--init-from {tmp_path / 'a'}: its checkpoint is damaged (")
    assert f"checkpoint {source} is corrupt: it fails its checksum" in said
    assert said.endswith("; pass another: an older checkpoints/step-N folder, or another file")


def test_a_json_file_that_is_no_manifest_is_refused_not_a_traceback(tmp_path):
    for text in ('{"lr": 0.1}', "not JSON", "[1, 2]"):
        config = tmp_path / "config.json"
        config.write_text(text)
        said = refused(config, tmp_path / "b", "the --init-from file is no checkpoint's manifest")
        assert said.startswith(f"--init-from {config}: no checkpoint's manifest, or a damaged one")


def test_a_checkpoint_of_another_format_version_is_refused_as_the_init_from_source(tmp_path):
    """Not "the checkpoint to resume", as the launcher said, nor only the resume's way out: the
    refusal names --init-from and the distconv to start the new run with."""
    from tests.test_checkpoint_build import _rewrite_metadata

    source = first_run(tmp_path / "a")
    _rewrite_metadata(source, version="3")
    with pytest.raises(CheckpointError) as refusal:
        train(TrainConfig(**SETTINGS, out=str(tmp_path / "b"), init_from=str(source)))
    said = str(refusal.value)
    assert said.startswith(
        f"--init-from {source}: its checkpoint has another format version (checkpoint {source} "
        "has format version '3'; this distconv reads version '2': "
    )
    assert said.endswith(
        "); start the new run with the distconv that wrote it, or from a checkpoint this one wrote"
    )
    line = f"distconv train: error: {said}"
    assert init_from_refused_in([line]) == "the --init-from checkpoint has another format version"
    assert refused_for_good_in([line]) is None  # not read as a resume's refusal
