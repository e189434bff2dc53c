"""A resume that distconv refuses because the checkpoint is of another run, or does not fit the
model, fails the same way on every attempt: ``--max-restarts`` restarted it all the same (two
restarts, the refusal three times over), where the ranks' different jobs were already not
retried. Real ``distconv train`` runs: one to checkpoint, then real launches resuming it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from distconv.rank_endings import resume_refused_in
from distconv.run_dir import RunDirectory
from tests.launcher.launch_cli import ENV, launch
from tests.test_resume_checks import _rewrite_extra

#: a short run of distconv train's own: its checkpoint is the one each launch resumes
TRAIN = ("--data", "synthetic", "--epochs", "1", "--no-progress", "-q")


@pytest.fixture(scope="module")
def checkpointed(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("first") / "out"
    command = [sys.executable, "-m", "distconv", "train", *TRAIN, "--batch-size", "64"]
    done = subprocess.run(
        [*command, "--out", str(out)], env=ENV, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return str(out)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("job", "change", "refusal"),
    [  # the rank's own line (one worker), and a rank told of it (a shard's job: two)
        (("--workers", "1", "--servers", "0"), ("--batch-size", "64", "--seed", "1"),
         "the checkpoint to resume comes from a different run"),
        (("--workers", "2", "--servers", "1", "--insecure"),
         ("--batch-size", "32", "--dtype", "float64"),  # named by its facts, not its fit
         "the checkpoint to resume comes from a different run"),
    ],
)  # fmt: skip
def test_a_refused_resume_is_not_restarted(tmp_path, checkpointed, job, change, refusal):
    out = tmp_path / "out"
    shutil.copytree(checkpointed, out)
    _refused_once(tmp_path, out, job, change, refusal)


@pytest.mark.timeout(120)
def test_a_resume_that_does_not_fit_the_model_is_not_restarted(tmp_path, checkpointed):
    """A checkpoint of an older distconv, which recorded neither the dtype nor the training
    set: nothing names the cause, so the parameters that differ are the refusal (another
    --dtype, now named by those facts where they are recorded, was this case's real launch)."""
    out = tmp_path / "out"
    shutil.copytree(checkpointed, out)
    _rewrite_extra(RunDirectory(out).latest(), dtype="None", train_data=None)
    job, change = ("--workers", "1", "--servers", "0"), ("--batch-size", "64", "--dtype", "float64")
    _refused_once(tmp_path, out, job, change, "the checkpoint to resume does not fit the model")


def _refused_once(tmp_path, out, job, change, refusal) -> None:
    """Resume ``out`` under a launch of ``job`` with ``--max-restarts 2`` and ``change``: one
    attempt, refused for ``refusal``, which the launcher says and records, restarting none."""
    run = tmp_path / "run"
    done = launch(
        "local", *job, "--max-restarts", "2", "--run-dir", str(run), "--",
        *TRAIN[:2], "--epochs", "2", "--out", str(out), "--resume", *change, cwd=tmp_path,
    )  # fmt: skip
    said = done.stderr + done.stdout
    assert done.returncode == 1, said[-3000:]
    unused = f"not restarting (--max-restarts 2): {refusal}, which every attempt would refuse"
    assert unused in done.stderr, said[-3000:]
    assert said.count("[worker 0] distconv train: error: ") == 1, said[-3000:]  # one attempt
    report = json.loads((run / "failure.json").read_text())
    assert report["restart"] == 0 and report["then"] == unused, report
    assert not (run / "restarts.jsonl").exists()


@pytest.mark.parametrize(
    "line",
    [
        "distconv train: error: checkpoint /r/a b/step-1/chief.safetensors comes from a "
        "different run; resuming would not reproduce it (seed: checkpoint 0, this run 1).",
        "rank 0: CheckpointError: checkpoint /r/c.safetensors does not fit the model: "
        "parameter 'w': model shape (4,), checkpoint shape (10,); aborting the MPI job",
        "distconv train: error: rank 1, all_equal:1: pserver 127.0.0.1:5: rank 0 could not "
        "set up: CheckpointError: checkpoint /r/c.safetensors comes from a different run; "
        "resuming would not reproduce it (global_batch: checkpoint 16, this run 8). To t...",
        "distconv.checkpoint.CheckpointError: checkpoint /r/c.safetensors does not fit the "
        "model: parameter 'w': model dtype float64, checkpoint dtype float32",
    ],
)
def test_the_refusals_are_read_in_each_form_a_rank_says_them(line):
    """Each form a rank's last line takes: ``distconv train``'s, MPI's reason, a rank told of
    it by a shard, a script's traceback."""
    kinds = ("comes from a different run", "does not fit the model")
    assert resume_refused_in(["before", line]) in kinds


@pytest.mark.parametrize(
    "line",
    [  # a quote of the words in another failure, or a checkpoint that may come next time
        "my_model.py: error: ValueError: retry: checkpoint x comes from a different run; "
        "resuming would not reproduce it",
        "distconv train: error: --resume: no complete checkpoint in /r/checkpoints",
        "checkpoint x does not fit the model: parameter 'w'",
    ],
)
def test_other_lines_are_no_refused_resume(line):
    assert resume_refused_in([line]) is None


#: a script that tries to resume, is refused, says so and trains afresh; its first attempt
#: then fails otherwise (a read error), which a restart gets past
FRESH = """\
import os, sys
print("CheckpointError: checkpoint old/step-1.json comes from a different run; resuming would "
      "not reproduce it (seed: checkpoint 0, this run 1); training afresh", flush=True)
print("epoch 1", flush=True)
if os.environ["DISTCONV_RESTART"] == "0":
    sys.exit("OSError: [Errno 5] Input/output error: 'data.npz'")
print("done")
"""


@pytest.mark.timeout(120)
def test_a_refusal_the_program_went_on_from_does_not_stop_its_restarts(tmp_path):
    """Any line of the failing rank's tail that read as a refused resume ended the job
    without a restart, though the rank had gone on from it and failed otherwise: only its
    last words (or what its peers were told) say why it failed."""
    script = tmp_path / "fresh.py"
    script.write_text(FRESH)
    run = tmp_path / "run"
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--max-restarts", "1",
        "--run-dir", str(run), "--", str(script), cwd=tmp_path,
    )  # fmt: skip
    said = done.stderr + done.stdout
    assert done.returncode == 0, said[-3000:]
    assert "not restarting" not in said, said[-3000:]
    assert "[worker 0] done" in said, said[-3000:]
    assert len((run / "restarts.jsonl").read_text().splitlines()) == 1
