"""A restart without ``--resume`` continues its own launch's run and refuses any other.

The launcher added ``--resume auto`` to ``distconv train`` on every restart: a first start
refused because ``--out`` held an older run ("already holds a run") was restarted with it, and
the restart silently resumed that older run. Now a restart (``DISTCONV_RESTART``
above 0) given ``resume=False`` continues the run whose newest checkpoint its own launch
(``DISTCONV_LAUNCH``) wrote, and otherwise refuses as its first start did; so the example
scripts, which pass ``resume=False`` unless told, resume on a restart too. Real files through
the Trainer, then the real launcher restarting real ``distconv train`` and example processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.run_dir import RunDirectory, RunDirError
from tests.child_env import child_path
from tests.restart_job import epochs_written, small_trainer

REPO = Path(__file__).resolve().parents[1]
REFUSED = "already holds a run; pass --resume to continue it"


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "job, resumes",
    [
        (dict(job_id="j1", launch="a", restart=1), True),  # its own launch's run: continued
        (dict(job_id="j1", launch="a", restart=0), False),  # a first start: refused
        (dict(job_id="j1", launch="b", restart=1), False),  # another launch of j1: refused
        (dict(job_id="j2", launch="b", restart=1), False),  # another job's: refused
        (dict(job_id="j1", launch=None, restart=1), False),  # no launch: runs not told apart
    ],
)
def test_a_restart_without_resume_continues_only_its_own_launchs_run(tmp_path, data, job, resumes):
    train, test = data
    out = tmp_path / "run"
    small_trainer(out, job_id="j1", launch="a").fit(train, test, epochs=1)
    again = small_trainer(out, **job)
    if resumes:
        assert [r["epoch"] for r in again.fit(train, test, epochs=2)] == [2]
        assert epochs_written(out) == [1, 2]
        assert RunDirectory(out).latest().launch == "a"
        return
    with pytest.raises(RunDirError) as info:
        again.fit(train, test, epochs=2)
    assert str(info.value).startswith(f"{out} {REFUSED}")
    assert RunDirectory(out).latest().step == 15 and epochs_written(out) == [1]


@pytest.mark.timeout(120)
def test_a_restart_given_resume_auto_or_true_resumes_any_run_as_asked(tmp_path, data):
    """A resume mode the user gave is kept as given: it continues whichever run is there."""
    train, test = data
    out = tmp_path / "run"
    small_trainer(out, job_id="j1", launch="a").fit(train, test, epochs=1)
    for epochs, resume in ((2, "auto"), (3, True)):
        history = small_trainer(out, job_id="j2", launch="b", restart=1).fit(
            train, test, epochs=epochs, resume=resume
        )
        assert [r["epoch"] for r in history] == [epochs]
    assert epochs_written(out) == [1, 2, 3]


ENV = {**os.environ, "PYTHONPATH": child_path(), "OMP_NUM_THREADS": "1"}
for _name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DISTCONV_RESTART", "DISTCONV_LAUNCH"):
    ENV.pop(_name, None)
TRAIN = ("--data", "synthetic", "--batch-size", "16", "--no-progress")


def _launch(
    tmp_path: Path, *program: str, servers: int = 0, env=None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "launcher", "local", "--workers", "1", "--servers", str(servers),
         "--max-restarts", "1", "--run-dir", str(tmp_path / "launch"), "--", *program],
        env=env or ENV, cwd=tmp_path, capture_output=True, text=True, timeout=200,
    )  # fmt: skip


@pytest.mark.timeout(300)
def test_a_restart_never_resumes_the_run_its_first_start_refused(tmp_path):
    """A reviewer's repro: ``--out`` holds a finished run, the job is launched into it
    without ``--resume``. The first start refuses it, and the launcher restarts none: a
    restart would refuse it alike (``test_a_restart_without_resume_continues_only_its_own_
    launchs_run``). The old run is as it was."""
    out = tmp_path / "old1"
    done = subprocess.run(
        [sys.executable, "-m", "distconv", "train", *TRAIN, "--epochs", "1", "--out", str(out)],
        env=ENV, capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    before = RunDirectory(out).latest()
    done = _launch(tmp_path, *TRAIN, "--epochs", "2", "--out", str(out))
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "not restarting (--max-restarts 1): the output directory already holds another run, "
        "which every attempt would refuse"
    ) in done.stderr
    assert "resumed from" not in done.stdout
    refusals = [line for line in done.stdout.splitlines() if REFUSED in line]
    assert len(refusals) == 1, done.stdout
    assert RunDirectory(out).latest() == before
    assert epochs_written(out) == [1]


#: the first start (DISTCONV_RESTART 0) SIGKILLs itself once its first checkpoint is complete
KILL_AFTER_FIRST_CHECKPOINT = """
import os, signal
if os.environ.get("DISTCONV_RESTART") == "0":
    from distconv import resume
    save = resume.StepCheckpoints.save
    def save_then_die(self, *args):
        save(self, *args)
        if self.run is not None:
            os.kill(os.getpid(), signal.SIGKILL)
    resume.StepCheckpoints.save = save_then_die
"""


def _killed_once_env(tmp_path: Path) -> dict[str, str]:
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(KILL_AFTER_FIRST_CHECKPOINT)
    return {**ENV, "PYTHONPATH": child_path(inject)}


def _assert_resumed_its_own_run(done: subprocess.CompletedProcess, out: Path, step: int) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failed with signal SIGKILL" in done.stderr and "restarting the job (1 of 1)" in (
        done.stderr
    )
    resumed = [line for line in done.stdout.splitlines() if "resumed from" in line]
    assert len(resumed) == 1 and f"step-{step:08d}" in resumed[0], done.stdout
    assert f" at step {step}, after epoch 1" in resumed[0], resumed  # not "at epoch 1"
    assert epochs_written(out) == [1, 2]


@pytest.mark.timeout(300)
def test_a_restarted_train_without_resume_continues_its_own_run(tmp_path):
    """No ``--resume`` and no ``--resume auto`` from the launcher: the restart of a first start
    killed after its first checkpoint continues it (384 synthetic examples / 16: 24 steps)."""
    out = tmp_path / "run"
    program = (*TRAIN, "--epochs", "2", "--out", str(out))
    done = _launch(tmp_path, *program, env=_killed_once_env(tmp_path))
    _assert_resumed_its_own_run(done, out, 24)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("servers", [0, 1])
def test_a_restarted_example_resumes_its_own_run(tmp_path, servers):
    """An example script, whose Trainer reads the launch and restart from the environment:
    its restart refused its own ``--out`` ("already holds a run"), so a restart was wasted.
    2048 examples / 32: 64 steps an epoch."""
    out = tmp_path / "ex1"
    script = str(REPO / "examples" / "mixed_regression.py")
    done = _launch(
        tmp_path, script, "--epochs", "2", "--out", str(out), servers=servers,
        env=_killed_once_env(tmp_path),
    )  # fmt: skip
    _assert_resumed_its_own_run(done, out, 64)


@pytest.mark.timeout(300)
def test_a_restarted_mpi_job_without_resume_continues_its_own_run(tmp_path):
    """Under ``distconv-launch mpi`` rank 0 alone reads the run directory and decides; the other
    rank takes its position (``share_position``). Rank 0 SIGKILLed after its first checkpoint
    (384 examples / a global batch of 32: 12 steps), the restarted ranks continue together."""
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "launcher", "mpi", "-np", "2", "--max-restarts", "1",
         "--run-dir", str(tmp_path / "launch"), "--", *TRAIN, "--epochs", "2", "--out", str(out)],
        env=_killed_once_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=200,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "died of signal 9 (SIGKILL)" in done.stderr, done.stderr  # "rank 0" where alone
    resumed = [line for line in done.stdout.splitlines() if "resumed from" in line]
    assert len(resumed) == 1 and "step-00000012" in resumed[0], done.stdout
    trained = [line for line in done.stdout.splitlines() if "epoch 2/2" in line]
    assert len(trained) == 2, done.stdout  # both ranks trained the resumed epoch
    assert epochs_written(out) == [1, 2]
