"""``distconv evaluate --from PATH``, run as a user runs it: a real ``distconv train`` first,
then the command in a process of its own, which must print the numbers of the run's
``metrics.jsonl`` (the test split of the run's seed), read the run's folder only, and refuse
what it cannot evaluate in words that name the cause."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.checkpoint import load_checkpoint, save_checkpoint
from distconv.checkpoint_paths import checkpoint_file
from distconv.data import as_arrays, load_dataset
from distconv.init_from import load_weights
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.child_env import child_env
from tests.held_lock import held_until_asked

pytestmark = pytest.mark.timeout(180)

#: a run of one epoch on the digits, quiet
TRAIN = ("--epochs", "1", "--no-progress", "-q")


def distconv(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m distconv ARGV`` in ``cwd``, its output captured; killed after 120 s."""
    command = [sys.executable, "-m", "distconv", *argv]
    return subprocess.run(
        command, cwd=cwd, env=child_env(), capture_output=True, text=True, timeout=120
    )


def trained(out: Path, *flags: str) -> dict:
    """Train one epoch into ``out``; the last line of its metrics.jsonl."""
    done = distconv("train", *TRAIN, "--out", str(out), *flags, cwd=out.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return last_metrics(out)


def last_metrics(out: Path) -> dict:
    return json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])


def evaluated(source: Path, *flags: str) -> dict:
    """``distconv evaluate --from SOURCE --log-format json``: its result line's fields."""
    done = distconv("evaluate", "--from", str(source), "--log-format", "json", *flags,
                    cwd=source.parent)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def refused(source: Path | str, *flags: str, cwd: Path) -> str:
    """The error line of a ``distconv evaluate`` that must fail with status 1."""
    done = distconv("evaluate", "--from", str(source), *flags, cwd=cwd)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    return done.stderr.strip().splitlines()[-1]


def hashes(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by its relative path, with its SHA-256 and mtime."""
    return {
        str(f.relative_to(folder)): f"{hashlib.sha256(f.read_bytes()).hexdigest()} "
        f"{f.stat().st_mtime_ns}"
        for f in sorted(folder.rglob("*"))
        if f.is_file()
    }


def test_a_float64_run_s_numbers_exactly_and_its_folder_untouched(tmp_path):
    out = tmp_path / "f64"
    line = trained(out, "--dtype", "float64")
    before = hashes(out)
    got = evaluated(out)
    assert (got["test_loss"], got["test_acc"]) == (line["test_loss"], line["test_acc"])
    assert (got["step"], got["epoch"], got["data"], got["seed"]) == (line["step"], 1, "digits", 0)
    text = distconv("evaluate", "--from", str(out), cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(
        f"test_loss {line['test_loss']!r}  test_acc {line['test_acc']!r}  (digits test split "
        f"of seed 0, 359 examples; checkpoint step {line['step']}, epoch 1: "
    )
    assert hashes(out) == before  # no lock taken anew, no plot drawn, nothing written


def test_a_float32_run_of_another_seed_from_each_kind_of_path(tmp_path):
    """The seed is the checkpoint's: the run's own split, whatever PATH names."""
    out = tmp_path / "seed3"
    line = trained(out, "--seed", "3")
    step = out / "checkpoints" / f"step-{line['step']:08d}"
    for source in (
        out,
        out / "checkpoints",
        step,
        Path(f"{step}.json"),
        step / "chief.safetensors",
    ):
        got = evaluated(source, "--batch-size", "7")
        assert got["seed"] == 3
        assert got["test_acc"] == line["test_acc"]  # float32: the loss's sums in other batches
        assert got["test_loss"] == pytest.approx(line["test_loss"], rel=1e-6)
    assert evaluated(out)["test_loss"] == line["test_loss"]  # training's batches: exact
    # another seed's split would not give the run's numbers: the seed is no option to get wrong
    other = _numbers_on_split(out, seed=0)
    assert other != (line["test_loss"], line["test_acc"])
    done = distconv("evaluate", "--from", str(out), "--seed", "0", cwd=tmp_path)
    assert done.returncode == 2 and "unrecognized arguments: --seed 0" in done.stderr


def _numbers_on_split(out: Path, seed: int) -> tuple[float, float]:
    """The run's weights evaluated on the digits' test split of ``seed``, in this process."""
    train, test = load_dataset("digits", None, seed)
    trainer = Trainer(lenet((1, 8, 8), 10), LocalSync(create_optimizer("sgd")), 1)
    load_weights(out, trainer.params)
    got = trainer.evaluate(as_arrays(test))
    return got["test_loss"], got["test_acc"]


def test_a_run_still_training_holding_its_lock_is_evaluated(tmp_path):
    out = tmp_path / "live"
    line = trained(out)
    with held_until_asked(out, seconds=30):  # as the training process holds it
        assert evaluated(out)["test_acc"] == line["test_acc"]


def test_what_it_cannot_evaluate_is_refused_naming_the_cause(tmp_path):
    out = tmp_path / "run"
    trained(out)
    missing = tmp_path / "nothing"
    assert refused(missing, cwd=tmp_path) == (
        f"distconv evaluate: error: --from {missing}: no such file or folder"
    )
    said = refused(out, "--data", "synthetic", cwd=tmp_path)
    assert "its weights do not fit this model (first difference: 'fc2.weight'" in said
    assert said.startswith("distconv evaluate: error: --from ")
    own = tmp_path / "own.safetensors"  # a script's Trainer recorded no data set or model
    save_checkpoint(own, lenet((1, 8, 8), 10).parameters(), seed=0)
    said = refused(own, cwd=tmp_path)
    assert f"--from {own}: a checkpoint of no model, data set None and seed 0" in said
    assert "load a script's own model with distconv.init_from.load_weights" in said
    said = refused(out, "--data", "mnist", cwd=tmp_path)
    assert "the mnist data set needs a directory (--data-dir)" in said


def test_a_training_set_other_than_the_run_s_is_refused(tmp_path):
    """The run's split needs the run's data: a checkpoint whose training set's fingerprint is
    not the one rebuilt (another --data-dir, a changed file) is refused, not evaluated on a test
    split that may hold training examples."""
    out = tmp_path / "run"
    trained(out)
    ckpt = load_checkpoint(checkpoint_file(out))
    params = lenet((1, 8, 8), 10).parameters()
    load_weights(out, params)
    other = {**ckpt.extra["train_data"], "sampled_examples_sha256": "0" * 16}
    moved = tmp_path / "moved.safetensors"
    save_checkpoint(moved, params, step=ckpt.step, epoch=ckpt.epoch, seed=ckpt.seed,
                    extra={**ckpt.extra, "train_data": other})  # fmt: skip
    said = refused(moved, cwd=tmp_path)
    assert said.startswith(
        f"distconv evaluate: error: DataError: --from {moved}: the training set --data digits "
        "gives now "
        "(seed 0) is not the one the run trained on"
    )


def test_a_checkpoint_inside_an_epoch_says_how_far_into_which_epoch(tmp_path):
    """A --checkpoint-every checkpoint after 30 of epoch 1's steps recorded 0 epochs complete;
    'epoch 0' read as the first epoch's end, or an epoch before the first."""
    out = tmp_path / "every"
    line = trained(out, "--checkpoint-every", "30", "--keep-checkpoints", "5")
    step30 = out / "checkpoints" / "step-00000030"
    got = evaluated(step30)
    assert (got["step"], got["epoch"], got["step_in_epoch"]) == (30, 0, 30)
    text = distconv("evaluate", "--from", str(step30), cwd=tmp_path)
    assert "; checkpoint step 30, 30 steps into epoch 1: " in text.stdout, text
    end = evaluated(out)
    assert (end["step"], end["epoch"], end["step_in_epoch"]) == (line["step"], 1, 0)
