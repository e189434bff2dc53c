"""What ``distconv train`` says about the output directory it picks itself (``--out`` left to
its default, ``runs/<data>-<optimizer>-seed<seed>``) when asked to resume, and about a run whose
newest checkpoint lies inside an epoch that ``--epochs`` did not ask for. Real subprocesses."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.child_env import child_path
from tests.mpi.common import mpiexec, run_mpi
from tests.sync.ps.ps_helpers import Shards
from tests.test_cli import SMALL, _assert_one_line_error, distconv

pytestmark = pytest.mark.timeout(120)


def test_resume_into_a_default_out_that_is_not_there_names_the_default_and_the_runs(tmp_path):
    """A --resume with another --seed looked in another default directory and said only "no
    complete checkpoint in runs/...-seed1/checkpoints ... does not exist", a folder the user
    never named; now it says whose default it is and which runs are there to resume."""
    proc = distconv("train", *SMALL, "--epochs", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = distconv("train", *SMALL, "--epochs", "2", "--seed", "1", "--resume", cwd=tmp_path)
    _assert_one_line_error(
        proc,
        "--resume: no run in runs/synthetic-adam-seed1, the default --out for --data synthetic "
        "--optimizer adam --seed 1 (a resumed run keeps the data, optimizer and seed it began "
        "with); runs/ holds runs to resume: pass --out runs/synthetic-adam-seed0 (newest first)",
    )
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["synthetic-adam-seed0"]


def test_resume_auto_into_a_new_default_out_says_it_trains_a_fresh_run(tmp_path):
    """--resume auto with another --optimizer trained a fresh run from scratch in another
    default directory and said only where it wrote; now a line says a fresh run began, and
    where the earlier one is. A launcher's run directory (no checkpoints of its own) is not
    named as one to pass to --out."""
    (tmp_path / "runs" / "launch-x" / "train").mkdir(parents=True)
    first = distconv("train", *SMALL, "--epochs", "1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    args = ("--epochs", "1", "--optimizer", "sgd", "--resume", "auto")
    proc = distconv("train", *SMALL, *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    said = (
        "--resume auto: no run in runs/synthetic-sgd-seed0, the default --out for --data "
        "synthetic --optimizer sgd --seed 0: training a fresh run; runs/ holds "
        "runs to resume: pass --out runs/synthetic-adam-seed0 (newest first)"
    )
    assert said in proc.stderr
    assert "test accuracy" in proc.stdout  # it trained: the fresh run the line announced
    again = distconv("train", *SMALL, *args, cwd=tmp_path)  # now there: resumed, no line
    assert again.returncode == 0 and "no run in" not in again.stderr, again.stderr
    assert "nothing left to do" in again.stdout


def test_a_resume_refused_into_the_default_is_told_to_the_other_workers_at_once(tmp_path):
    """Two workers of a parameter-server job started by hand, each with the default --out:
    rank 0's refusal came before it met the shards, so rank 1 waited for it for a minute and
    then said only that rank 0 sent nothing; a refusal made in the setup, as before, is told
    to the others at once (rank 0 could not set up), and rank 0 still names the default."""
    shards = Shards(tmp_path)
    procs: list[subprocess.Popen] = []
    try:
        endpoint = shards.start(1, 2)[0]
        argv = [sys.executable, "-m", "distconv", "train", *SMALL, "--pservers", endpoint]
        argv += ["--insecure", "--world-size", "2", "--resume", "--rank"]
        env = {**os.environ, "PYTHONPATH": child_path()}
        for rank in ("0", "1"):
            procs.append(
                subprocess.Popen(
                    [*argv, rank],
                    cwd=tmp_path,
                    env=env,
                    text=True,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )  # fmt: skip
            )
        said = [proc.communicate(timeout=30)[1] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        shards.stop()
    assert procs[0].returncode == 1, said[0]
    assert "no run in runs/synthetic-adam-seed0, the default --out for --data" in said[0]
    assert procs[1].returncode == 75, said[1]
    assert "rank 0 could not set up: CheckpointError: --resume: " in said[1], said[1]


@pytest.mark.mpi
@pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed")
def test_a_resume_refused_into_the_default_under_mpi_names_it_and_ends_the_job(tmp_path):
    """Under mpiexec the chief says the refusal naming the default, the other rank is told
    that rank 0 could not set up, and the job ends at once (no rank left waiting)."""
    train = shlex.join([sys.executable, "-m", "mpi4py", "-m", "distconv", "train", *SMALL])
    command = f"cd {shlex.quote(str(tmp_path))} && exec {train} --sync mpi --resume"
    done = run_mpi(["-n", "2", "sh", "-c", command], timeout=60)
    assert done.returncode != 0, done.stderr
    said = done.stdout + done.stderr
    assert "no run in runs/synthetic-adam-seed0, the default --out for --data synthetic" in said
    assert "rank 0 could not set up: CheckpointError: --resume: " in said, said


def test_a_given_out_that_is_not_there_keeps_its_own_message(tmp_path):
    """Only the default is explained: a --out the user typed is theirs to have mistyped."""
    out = tmp_path / "typo"
    proc = distconv("train", *SMALL, "--out", str(out), "--resume", cwd=tmp_path)
    _assert_one_line_error(proc, f"no complete checkpoint in {out / 'checkpoints'}: {out} does not")
    assert "default --out" not in proc.stderr


def test_nothing_left_to_do_names_a_started_epoch_and_how_to_finish_it(tmp_path):
    """A run whose newest checkpoint is 3 steps into epoch 2, resumed with --epochs 1, said
    only "has finished epoch 1": its weights are those of step 15, and --epochs 2 finishes
    the epoch it is in (12 steps an epoch: 384 examples, 32 a batch)."""
    out = tmp_path / "run"
    base = (*SMALL, "--out", str(out), "--checkpoint-every", "5", "--keep-checkpoints", "9")
    proc = distconv("train", *base, "--epochs", "2")
    assert proc.returncode == 0, proc.stderr
    checkpoints = out / "checkpoints"
    for step in (20, 24):  # newest left: step 15, 3 steps into epoch 2
        (checkpoints / f"step-{step:08d}.json").unlink()
        shutil.rmtree(checkpoints / f"step-{step:08d}")
    proc = distconv("train", *base, "--epochs", "1", "--resume")
    assert proc.returncode == 0, proc.stderr
    assert (
        f"nothing left to do: the run in {out} has finished epoch 1 and is 3 steps into epoch "
        "2; --epochs counts the run's epochs from its start: --epochs 2 finishes that one"
    ) in proc.stdout


def test_nothing_left_to_do_at_an_epoch_end_says_no_more(tmp_path: Path):
    out = tmp_path / "run"
    proc = distconv("train", *SMALL, "--out", str(out), "--epochs", "1")
    assert proc.returncode == 0, proc.stderr
    proc = distconv("train", *SMALL, "--out", str(out), "--epochs", "1", "--resume")
    assert proc.returncode == 0, proc.stderr
    line = f"nothing left to do: the run in {out} has finished epoch 1\n"
    assert proc.stdout == line


def test_a_run_whose_name_breaks_a_line_is_named_as_a_shell_takes_it_back(tmp_path):
    """The error is one line, so a run named ``x<newline>y`` was named ``x y``: a run that is
    not there. It is named ``$'x\\ny'``, as the errors name such a path."""
    (tmp_path / "runs" / "x\ny" / "checkpoints").mkdir(parents=True)
    (tmp_path / "runs" / "x\ny" / "checkpoints" / "step-00000012.json").write_text("{}")
    proc = distconv("train", *SMALL, "--epochs", "1", "--resume", cwd=tmp_path)
    _assert_one_line_error(
        proc, "; runs/ holds runs to resume: pass --out $'runs/x\\ny' (newest first)"
    )
