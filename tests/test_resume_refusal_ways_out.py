"""A resume refused because a setting changed ends with the command line's way on: a new run
from the checkpoint's weights (``--init-from``, another ``--out``), which, followed as said,
trains; a changed global batch is told in numbers, with the flag that keeps it; a changed model
keeps its own advice (the weights fit no other model)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from distconv.checkpoint import CheckpointError
from distconv.global_batch_words import global_batch_clause
from distconv.resume_facts import FACTS_FORM, FACTS_FORM_KEY, check_same_run
from tests.child_env import child_env

pytestmark = pytest.mark.timeout(120)

RUN = ["--data", "synthetic", "--dtype", "float64", "--epochs", "1", "--no-progress"]


def distconv_train(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "distconv", "train", *RUN, *args],
        cwd=cwd,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=100,
    )


def test_a_changed_lr_is_refused_with_init_from_which_followed_as_said_trains(tmp_path):
    assert distconv_train("--out", "a", cwd=tmp_path).returncode == 0
    refused = distconv_train("--out", "a", "--resume", "--lr", "0.0005", cwd=tmp_path)
    assert refused.returncode == 1
    file = "a/checkpoints/step-00000024/chief.safetensors"
    assert (
        "To start a new run from these weights with this run's settings (step 0, fresh "
        f"optimizer state and schedule), pass --init-from {file} and another --out; in a "
        "script, load them first (distconv.checkpoint.restore_checkpoint)."
    ) in refused.stderr
    followed = distconv_train("--out", "b", "--init-from", file, "--lr", "0.0005", cwd=tmp_path)
    assert followed.returncode == 0, followed.stderr
    assert f"initialised from {file} (step 24, content digest " in followed.stderr


def test_a_changed_global_batch_is_told_in_numbers_with_the_batch_size_that_keeps_it(tmp_path):
    assert distconv_train("--out", "a", cwd=tmp_path).returncode == 0
    refused = distconv_train("--out", "a", "--resume", "--batch-size", "32", cwd=tmp_path)
    assert (
        "must stay the same across a resume: checkpoint 16 = 1 worker x 16 x 1 pass, this run "
        "32 = 1 worker x 32 x 1 pass; --batch-size 16 keeps it on 1 worker." in refused.stderr
    ), refused.stderr


def facts(total: int, batch: int, passes: int, world: int | None = None) -> dict:
    recorded = {"global_batch": total, "batch_size": batch, "accumulate": passes}
    return recorded if world is None else {**recorded, "world_size": world}


@pytest.mark.parametrize(
    ("theirs", "ours", "said"),
    [
        (
            facts(16, 16, 1, 1),
            facts(32, 16, 1),
            "checkpoint 16 = 1 worker x 16 x 1 pass, this run 32 = 2 workers x 16 x 1 pass; "
            "--batch-size 8 keeps it on 2 workers.",
        ),
        (
            facts(16, 8, 1, 2),
            facts(24, 8, 1),
            "checkpoint 16 = 2 workers x 8 x 1 pass, this run 24 = 3 workers x 8 x 1 pass; "
            "no --batch-size or --accumulate keeps it on 3 workers (16 is no multiple of 3).",
        ),
        (
            facts(48, 8, 3, 2),
            facts(32, 8, 1),
            "checkpoint 48 = 2 workers x 8 x 3 passes, this run 32 = 4 workers x 8 x 1 pass; "
            "--batch-size 12 keeps it on 4 workers.",
        ),
        (
            facts(24, 8, 3),
            facts(40, 8, 5),
            "checkpoint 24 = 1 worker x 8 x 3 passes, this run 40 = 1 worker x 8 x 5 passes; "
            "--accumulate 3 keeps it on 1 worker.",
        ),
    ],
)
def test_the_global_batch_clause_gives_both_products_and_the_flag(theirs, ours, said):
    assert global_batch_clause(theirs, ours).endswith(said)


def test_a_checkpoint_recording_too_little_gets_the_plain_clause():
    said = global_batch_clause({"global_batch": 16}, facts(32, 16, 1))
    assert said == (
        " The global batch (world size x batch size x accumulate) must stay the same across a "
        "resume."
    )


def test_a_changed_model_keeps_its_own_advice_not_init_from():
    layers = {"fc": {"type": "Dense", "act": "tanh", "inputs": ["x"]}}
    theirs = {"layers": layers, "seed": 0, FACTS_FORM_KEY: FACTS_FORM}
    ours = {"layers": {"fc": {"type": "Dense", "act": "relu", "inputs": ["x"]}}, "seed": 0}
    with pytest.raises(CheckpointError) as refused:
        check_same_run("c.safetensors", theirs, ours)
    said = str(refused.value)
    assert "build the model as the checkpoint's" in said and "--init-from" not in said
    assert said.endswith("load them first (distconv.checkpoint.restore_checkpoint).")
