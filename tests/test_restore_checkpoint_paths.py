"""What ``restore_checkpoint(path, params)`` says of a path that is no checkpoint file, in a
script: a run's folder, a step's folder, a step's manifest, a parameter-server shard's part.

It reads one file exactly as it was written (the resume's read: no newest chosen, no dtype
cast), so these stay refused; but they were called "a directory, not a file" with no way out,
or, whole and distconv's, "truncated or corrupt" and "not a distconv one", which send a user
looking for disk trouble. Each now names the file to pass (the one ``--init-from`` would
load) or ``load_weights``, and none is a ``CheckpointDamaged``, which a resume sets aside.
A resume still sets aside a step whose chief part holds a shard's blocks."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from distconv.checkpoint import (
    CheckpointDamaged,
    CheckpointError,
    CheckpointReadError,
    load_checkpoint,
    restore_checkpoint,
)
from distconv.checkpoint_file_kinds import SHARD_PART_IS
from distconv.init_from import load_weights
from distconv.job import TrainConfig, train
from distconv.models import lenet
from distconv.refused_starts import init_from_refused_in
from distconv.source_words import INIT_FROM_FLAG
from tests.launcher.conftest import own_home  # noqa: F401  (its launches' HOME: their own)
from tests.launcher.launch_cli import launch
from tests.launcher.test_init_from_restarts import SHARDED, TRAIN
from tests.test_init_from import SETTINGS, first_run

pytestmark = pytest.mark.timeout(120)

LOAD_WEIGHTS = (
    "load its weights with distconv.init_from.load_weights(path, params), which takes a run's "
    "folder, a step's folder or manifest, and casts the weights to the model's dtypes"
)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A real run's folder: float64 weights, three step checkpoints."""
    out = tmp_path_factory.mktemp("run") / "a"
    first_run(out, checkpoint_every=8)
    return out


@pytest.fixture(scope="module")
def shard_part(tmp_path_factory) -> Path:
    """A real parameter-server run's shard part, at the top of its --out, where
    ``distconv-launch local`` points the shard's --checkpoint-dir."""
    top = tmp_path_factory.mktemp("ps")
    out = top / "ps"
    done = launch(*SHARDED, "--run-dir", str(top / "job"), "--", *TRAIN, "--out", str(out),
                  cwd=top)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return out / "pserver-shard0-steplast.safetensors"


def _model():
    return lenet((1, 8, 8), 4).parameters()  # float32: the float64 run needs load_weights


def _refusal(path: Path) -> CheckpointError:
    with pytest.raises(CheckpointError) as refused:
        restore_checkpoint(path, _model())
    assert not isinstance(refused.value, CheckpointDamaged), refused.value  # not set aside
    return refused.value


@pytest.mark.parametrize("named", ["", "checkpoints", "checkpoints/step-00000024"])
def test_a_folder_is_refused_naming_its_newest_file_and_load_weights(run, named):
    folder = run / named if named else run
    newest = run / "checkpoints" / "step-00000024" / "chief.safetensors"
    refused = _refusal(folder)
    assert isinstance(refused, CheckpointReadError)  # as a folder always was: nothing renamed
    assert str(refused) == (
        f"checkpoint {folder} is a directory, not a file: pass the checkpoint file {newest}, "
        f"or {LOAD_WEIGHTS}"
    )
    theirs = load_checkpoint(newest).params  # the advice, taken, loads
    params = _model()
    for p in params:  # the run's own dtype: restore_checkpoint casts nothing
        p.cast(np.float64)
    restore_checkpoint(newest, params)
    assert all(np.array_equal(p.value, theirs[p.name]) for p in params)
    cast = _model()  # and load_weights takes the folder itself, cast to float32
    load_weights(folder, cast)
    assert all(np.array_equal(p.value, theirs[p.name].astype(np.float32)) for p in cast)


def test_a_manifest_is_refused_naming_the_file_it_names(run):
    manifest = run / "checkpoints" / "step-00000016.json"
    refused = _refusal(manifest)
    assert str(refused) == (
        f"checkpoint {manifest} is a step's manifest, which names that step's files, not a "
        f"checkpoint file: pass the checkpoint file "
        f"{run / 'checkpoints' / 'step-00000016' / 'chief.safetensors'}, or {LOAD_WEIGHTS}"
    )


def test_another_json_file_is_not_called_a_manifest_nor_corrupt(tmp_path):
    other = tmp_path / "config.json"
    other.write_text('{"lr": 0.1}')
    said = str(_refusal(other))
    assert said.startswith(f"checkpoint {other} is a JSON file, not a checkpoint file: pass ")


@pytest.mark.usefixtures("own_home")
def test_a_shard_part_is_named_as_init_from_names_it(shard_part, tmp_path):
    """By its name, and renamed (its metadata), in the words ``--init-from`` uses, without
    ``--init-from``, and with a way out that restore_checkpoint takes."""
    renamed = tmp_path / "weights.safetensors"
    shutil.copyfile(shard_part, renamed)
    for part in (shard_part, renamed):
        said = str(_refusal(part))
        assert said == (
            f"checkpoint {part} is {SHARD_PART_IS}: pass the chief's part of one of its run's "
            f"checkpoints, RUN/checkpoints/step-N/chief.safetensors, which holds every weight, "
            f"or load its run's weights with {LOAD_WEIGHTS[len('load its weights with ') :]}"
        )
    for part in (shard_part, renamed):  # renamed was "damaged", without --init-from at all
        with pytest.raises(CheckpointError) as by_flag:
            load_weights(part, _model(), words=INIT_FROM_FLAG)
        said = str(by_flag.value)
        assert said.startswith(f"--init-from {part}: {SHARD_PART_IS}; "), said
        line = f"distconv train: error: {said}"  # as the launcher reads it back: not restarted
        assert (
            init_from_refused_in([line])
            == "the --init-from path is a parameter-server shard's part"
        )


@pytest.mark.usefixtures("own_home")
def test_a_resume_still_sets_aside_a_chief_part_that_holds_a_shard_s_blocks(
    shard_part, tmp_path, caplog
):
    """A step's ``chief.safetensors`` with a shard's content is a damaged step, set aside for
    the one before as any damaged chief part is: the shard words are for a file passed by hand."""
    out = tmp_path / "a"
    first_run(out, checkpoint_every=8)
    newest = out / "checkpoints" / "step-00000024" / "chief.safetensors"
    shutil.copyfile(shard_part, newest)
    with pytest.raises(CheckpointDamaged, match="not a distconv one"):
        load_checkpoint(newest)
    caplog.set_level(logging.WARNING, logger="distconv")
    train(TrainConfig(**{**SETTINGS, "epochs": 2}, out=str(out), resume=True, checkpoint_every=8))
    assert (out / "checkpoints" / "step-00000024.json.unusable").is_file()
    assert any("setting it aside" in r.getMessage() for r in caplog.records)
