"""A synchronous job whose update diverges (``--optimizer sgd --lr 1e5``: NaN at step 3) meets
it at the same step on every attempt: each resumes from the step-2 checkpoint and computes the
same values. ``--max-restarts 2`` restarted it twice, and the report blamed whichever worker
exited first (worker 0, then 1, then 0), for a divergence of the whole job. Real
``distconv-launch local`` with a real shard, and ``mpi`` under a real ``mpiexec -n 2``; an
asynchronous job, whose next attempt may compute other values, is still restarted."""

from __future__ import annotations

import io
import json
import sys
from dataclasses import replace
from pathlib import Path
from threading import Lock

import pytest

from launcher.attempt_failure import may_train_async
from launcher.child import Child
from launcher.child_spec import ChildSpec
from launcher.commands import ServerOptions, server_command
from launcher.divergence import EVERY_ATTEMPT, trains_async
from launcher.failure import Failure
from launcher.go_on import (
    DIVERGED_AFRESH,
    DIVERGED_GO_ON,
    DIVERGED_GO_ON_OWN_OUT,
    DIVERGED_GO_ON_PROGRAM,
    MAY_HAVE_DIVERGED,
    way_on_after_failure,
)
from tests.launcher.launch_cli import launch
from tests.launcher.real_children import mpiexec_or_skip

#: distconv train's arguments whose loss turns NaN at step 3, with a checkpoint every step
DIVERGES = ("--optimizer", "sgd", "--lr", "1e5", "--epochs", "2", "--checkpoint-every", "1")
NOT_RESTARTED = f"then not restarting (--max-restarts 2): {EVERY_ATTEMPT}"


def _launched(tmp_path: Path, *own: str, train: tuple[str, ...] = ()) -> tuple[str, int, Path]:
    """The launcher's output, status and run directory after ``own`` (its flags) with
    ``--max-restarts 2`` ran :data:`DIVERGES` (and ``train``, its flags' last say)."""
    run = tmp_path / "run"
    argv = [*own, "--max-restarts", "2", "--run-dir", str(run), "--", *DIVERGES, *train]
    argv.append("--no-progress")
    done = launch(*argv, cwd=tmp_path, timeout=150)
    return done.stderr + done.stdout, done.returncode, run


def _assert_one_attempt(said: str, status: int, run: Path) -> dict:
    """One attempt, status 1, a ``then`` saying why it was not restarted; the report."""
    assert status == 1, said[-3000:]
    assert "restarting the job" not in said, said[-3000:]
    assert NOT_RESTARTED in said, said[-3000:]
    assert not (run / "restarts.jsonl").exists()
    report = json.loads((run / "failure.json").read_text())
    assert report["restart"] == 0 and report["then"] == NOT_RESTARTED[len("then ") :], report
    assert report["failed_rank"] is None, report  # the first to exit is no culprit
    return report


@pytest.mark.timeout(180)
def test_a_sync_parameter_server_divergence_is_not_restarted_and_blames_no_worker(tmp_path):
    said, status, run = _launched(tmp_path, "local", "--workers", "2", "--servers", "1")
    report = _assert_one_attempt(said, status, run)
    # the job's, not a rank's: rank 0's part was summed into and could not be checked
    cause = report["cause"]
    assert cause.startswith("the update diverged at step 3 (a non-finite gradient of "), cause
    assert "rank 0's part, summed into, could not be checked" in cause, cause
    headline = next(line for line in said.splitlines() if "every rank stops on it" in line)
    assert headline.startswith(f"distconv-launch: {cause}; every rank stops on it alike ("), said
    assert " failed with exit code" not in headline, headline  # no one worker blamed
    _assert_way_on_is_a_new_run(tmp_path, said, report, "local", "--workers", "2")


def _assert_way_on_is_a_new_run(tmp_path: Path, said: str, report: dict, *how: str) -> None:
    """The way on is a new run with a lower --lr from an earlier checkpoint's weights, not the
    same command with --resume auto (which diverges again, and with another --lr is refused);
    run as it says, from the earlier one it lists, it trains (from the newest, step 2, even
    --lr 1e-9 diverges at once)."""
    assert report["go_on"] == DIVERGED_GO_ON, report
    newest = Path(report["checkpoint"])
    kept = f"the newest checkpoint kept is step 2 ({newest}){MAY_HAVE_DIVERGED}"
    listed = f" (steps 1, 2 kept in {newest.parent.parent})"
    assert f"distconv-launch: {kept}{listed}; {DIVERGED_GO_ON}" in said.splitlines(), said[-3000:]
    train = ["--optimizer", "sgd", "--lr", "1e-9", "--epochs", "1", "--no-progress"]
    init = ["--init-from", str(newest.parent.parent / "step-00000001" / newest.name)]
    done = launch(*how, "--run-dir", str(tmp_path / "new"), "--", *train, *init, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.timeout(180)
def test_an_mpi_divergence_is_not_restarted(tmp_path):
    mpiexec_or_skip()
    said, status, run = _launched(tmp_path, "mpi", "-np", "2")
    report = _assert_one_attempt(said, status, run)
    cause = report["cause"]
    assert "TrainingError: the loss became NaN or infinite in epoch 1, at step 3; " in cause
    assert "(--init-from PATH --out NEW), or start afresh" in cause, cause  # not --resume
    _assert_way_on_is_a_new_run(tmp_path, said, report, "mpi", "-np", "2")


@pytest.mark.timeout(180)
def test_an_async_parameter_server_job_that_diverges_is_still_restarted(tmp_path):
    """Its next attempt may not meet it again: another order of pushes is other values. (Its
    shard names the rank whose push is not finite, no divergence of the job's: the async rule
    itself is :func:`test_a_divergence_is_restarted_only_where_the_shards_run_async`'s.)"""
    said, status, run = _launched(
        tmp_path, "local", "--workers", "2", "--servers", "1", "--mode", "async"
    )
    assert status == 1, said[-3000:]
    assert "restarting the job (2 of 2)" in said, said[-3000:]
    assert len((run / "restarts.jsonl").read_text().splitlines()) == 2
    assert json.loads((run / "failure.json").read_text())["restart"] == 2


def test_the_launcher_reads_an_async_job_from_its_shards_command():
    """``--mode async`` is the launcher's flag, passed to its shards, not to distconv train."""
    shard = ServerOptions(num_shards=1, workers=2, mode="async")
    assert trains_async([server_command(0, 5555, shard)])
    sync = ServerOptions(num_shards=1, workers=2)
    assert not trains_async([server_command(0, 5555, sync)])
    assert not trains_async([])  # MPI, or a job without shards


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_nan_loss_is_restarted_only_in_an_async_job(asynchronous):
    said = "distconv train: error: TrainingError: the loss became NaN or infinite in epoch 1, at"
    failure = Failure("worker", 0, 1, None, "w.log", [f"{said} step 3"], 0)
    failure = replace(failure, asynchronous=asynchronous)  # as attempt_failure sets it
    assert failure.diverged and failure.cause.startswith("the loss became NaN"), failure.cause
    assert failure.every_attempt == (None if asynchronous else EVERY_ATTEMPT)
    assert failure.failed_rank is None, failure  # worker 0 only exited first


def test_an_mpi_divergence_names_no_failed_rank():
    """mpiexec's cause names the rank whose reason line came last: one of several alike."""
    said = "rank 1 ended the job: TrainingError: the loss became NaN or infinite in epoch 1"
    failure = Failure("mpiexec", 0, 1, None, "m.log", [], 0, cause=f"{said}, at step 3")
    assert failure.diverged and failure.failed_rank is None, failure


@pytest.mark.timeout(180)
def test_a_one_worker_divergence_is_not_restarted(tmp_path):
    said, status, run = _launched(tmp_path, "local", "--workers", "1", "--servers", "0")
    report = _assert_one_attempt(said, status, run)
    cause = report["cause"]
    assert cause.startswith("the loss became NaN or infinite in epoch 1, at step 3; "), cause


@pytest.mark.timeout(180)
def test_a_divergence_before_the_first_checkpoint_goes_on_afresh_with_a_lower_lr(tmp_path):
    """No checkpoint kept: no earlier weights to start from, and --resume auto with another
    --lr starts afresh (none refuses it), as the way on says; run as it says, it trains."""
    own = ("local", "--workers", "1", "--servers", "0")
    said, status, run = _launched(tmp_path, *own, train=("--checkpoint-every", "1000"))
    report = _assert_one_attempt(said, status, run)
    assert (report["checkpoint"], report["go_on"]) == (None, DIVERGED_AFRESH), report
    none_kept = "distconv-launch: no checkpoint kept yet: --resume auto starts afresh"
    assert f"{none_kept}; {DIVERGED_AFRESH}" in said.splitlines(), said[-3000:]
    again = [*own, "--run-dir", str(run), "--", *DIVERGES, "--resume", "auto", "--lr", "0.01"]
    done = launch(*again, "--epochs", "1", "--no-progress", cwd=tmp_path, timeout=100)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_way_on_after_a_programs_divergence_is_a_new_run():
    """A program that is not distconv train: its flags are not known, and no --resume goes on."""
    way_on = way_on_after_failure("J", None, diverged=True)
    assert way_on.go_on == DIVERGED_GO_ON_PROGRAM and way_on.line == DIVERGED_GO_ON_PROGRAM
    assert way_on_after_failure("J", None).go_on.startswith("to go on with this run, give the")


@pytest.mark.timeout(180)
def test_the_way_on_after_a_divergence_into_an_own_out_names_another_out(tmp_path):
    """Train arguments that name their own --out: the same command with another --job-id was
    refused there ('already holds a run': the diverged run holds it); run as the way on says,
    with another --out, it trains."""
    own, out = ("local", "--workers", "1", "--servers", "0"), tmp_path / "own"
    said, status, run = _launched(tmp_path, *own, train=("--out", str(out)))
    report = _assert_one_attempt(said, status, run)
    assert report["go_on"] == DIVERGED_GO_ON_OWN_OUT, report
    assert "another --out, --init-from PATH" in report["go_on"], report
    train = [*DIVERGES, "--out", str(tmp_path / "new"), "--lr", "1e-3", "--epochs", "1"]
    init = ["--init-from", str(out / "checkpoints" / "step-00000001" / "chief.safetensors")]
    again = [*own, "--run-dir", str(tmp_path / "again"), "--", *train, *init, "--no-progress"]
    done = launch(*again, cwd=tmp_path, timeout=100)
    assert done.returncode == 0, done.stderr[-3000:]


#: a program of its own whose Trainer's loss turned NaN (TrainingError's own words)
_PROGRAM_DIVERGES = (
    "from distconv.step_guard import TrainingError\n"
    "raise TrainingError('the loss became NaN or infinite in epoch 1, at step 3')\n"
)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_divergence_is_restarted_only_where_the_shards_run_async(tmp_path, mode):
    """The launcher's shards' --mode decides: a program's NaN loss under async shards is
    restarted, under sync shards it is not."""
    script = tmp_path / "own.py"
    script.write_text(_PROGRAM_DIVERGES)
    own = ["local", "--workers", "1", "--servers", "1", "--mode", mode, "--max-restarts", "1"]
    run = tmp_path / "run"
    done = launch(*own, "--run-dir", str(run), "--", str(script), cwd=tmp_path, timeout=100)
    assert done.returncode == 1, done.stderr[-3000:]
    restarted = "restarting the job (1 of 1)" in done.stderr
    assert restarted == (mode == "async"), done.stderr[-3000:]
    assert json.loads((run / "failure.json").read_text())["restart"] == int(restarted)


@pytest.mark.parametrize("shards", [(), ("--pserv=127.0.0.1:5555",)])
def test_distconv_train_without_the_launchers_shards_is_async_only_with_its_own(tmp_path, shards):
    """'local --servers 0 -- --pservers h:p': the workers train with shards started apart,
    async or not as their own launch set; without --pservers a worker trains alone (sync)."""
    argv = [sys.executable, "-m", "distconv", "train", *shards, "--help"]  # exits at once
    child = Child(ChildSpec("worker", 0, argv), tmp_path / "w.log", io.BytesIO(), Lock())
    try:
        assert may_train_async([child]) == bool(shards)
    finally:
        child.finish()  # kills what is left, reaps, closes the log


@pytest.mark.timeout(120)
def test_a_program_of_a_launch_without_shards_that_diverges_is_still_restarted(tmp_path):
    """Its program may name shards of its own (async, or keeping their state across
    restarts): not known to be synchronous, so not known to diverge again."""
    script = tmp_path / "own.py"
    script.write_text(_PROGRAM_DIVERGES)
    run = tmp_path / "run"
    argv = ["local", "--workers", "1", "--servers", "0", "--max-restarts", "1"]
    done = launch(*argv, "--run-dir", str(run), "--", str(script), cwd=tmp_path, timeout=100)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "restarting the job (1 of 1)" in done.stderr, done.stderr[-3000:]
    assert json.loads((run / "failure.json").read_text())["restart"] == 1
