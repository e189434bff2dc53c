"""``distconv train --init-from PATH`` refused at its start (weights that do not fit the model,
the source inside the ``--out`` that ``--overwrite`` deletes, nothing at PATH) meets the same
refusal on every attempt: ``distconv-launch --max-restarts`` restarts none of them. Real
``distconv train`` runs: one to checkpoint, then real launches of one worker."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.launcher.launch_cli import ENV, launch

pytestmark = pytest.mark.timeout(120)

#: the first run, which checkpoints the source (synthetic data: 4 classes, 64 a batch)
TRAIN = ("--data", "synthetic", "--epochs", "1", "--no-progress", "-q", "--batch-size", "64")
LOCAL_1 = ("local", "--workers", "1", "--servers", "0")
#: two workers and a shard: worker 1 stops because the chief could not set up, as told
SHARDED = ("local", "--workers", "2", "--servers", "1", "--insecure")
WORKER_0 = "[worker 0] distconv train: error: "


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> str:
    """The ``--out`` of a finished run, whose newest checkpoint each launch starts from."""
    out = tmp_path_factory.mktemp("source") / "out"
    command = [sys.executable, "-m", "distconv", "train", *TRAIN, "--out", str(out)]
    done = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return str(out)


def launched_once(tmp_path, program: tuple[str, ...], refusal: str, job=LOCAL_1) -> str:
    """Launch ``program`` (train's arguments) under ``job`` with ``--max-restarts 2``: one
    attempt, refused for ``refusal``, which the launcher says and records, restarting none;
    what it said."""
    run = tmp_path / "run"
    done = launch(*job, "--max-restarts", "2", "--run-dir", str(run), "--", *program,
                  cwd=tmp_path)  # fmt: skip
    said = done.stderr + done.stdout
    assert done.returncode == 1, said[-3000:]
    unused = f"not restarting (--max-restarts 2): {refusal}, which every attempt would refuse"
    assert unused in done.stderr, said[-3000:]
    assert len([line for line in said.splitlines() if line.startswith(WORKER_0)]) == 1, said
    report = json.loads((run / "failure.json").read_text())
    assert report["restart"] == 0 and report["then"] == unused, report
    return said


def test_weights_that_do_not_fit_are_not_restarted(tmp_path, source):
    program = ("--data", "digits", "--epochs", "1", "--out", str(tmp_path / "b"))
    said = launched_once(
        tmp_path,
        (*program, "--init-from", source),
        "the --init-from checkpoint does not fit the model",
    )
    assert "its weights do not fit this model (first difference: 'fc2.weight'" in said


def test_overwrite_of_the_out_holding_the_source_is_not_restarted(tmp_path, source):
    out = tmp_path / "a"
    shutil.copytree(source, out)
    before = sorted(p.name for p in (out / "checkpoints").iterdir())
    program = (*TRAIN[:4], "--out", str(out), "--overwrite", "--init-from", str(out))
    launched_once(tmp_path, program, "--overwrite would delete the --init-from checkpoint")
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == before


@pytest.mark.parametrize(
    ("made", "job"),
    [(False, LOCAL_1), (True, LOCAL_1), (False, SHARDED)],
    ids=["missing", "empty folder", "told by a shard"],
)
def test_nothing_at_the_path_is_not_restarted(tmp_path, made, job):
    path = tmp_path / "nothing"
    if made:
        path.mkdir()
    program = (*TRAIN[:4], "--out", str(tmp_path / "b"), "--init-from", str(path))
    launched_once(tmp_path, program, "the --init-from path holds no checkpoint", job)


def test_resume_with_nothing_to_resume_is_not_restarted(tmp_path, source):
    """Already read as ``--resume``'s own refusal: the sentence on --init-from keeps it so."""
    program = (*TRAIN[:4], "--out", str(tmp_path / "b"), "--resume", "--init-from", source)
    launched_once(tmp_path, program, "the output directory holds no checkpoint to resume")
