"""After a crash (a child's SIGKILL, a job's own error) the launcher's report named neither the
checkpoint the run kept nor the command that goes on, which a stop's report says: the operator
listed ``checkpoints/`` and worked the command out, and a launch whose job id the launcher chose
made a new, empty run directory when given "the same command". Every failure's report now ends
with the newest complete checkpoint (or that none is kept) and the way on, which
``failure.json`` carries too (``checkpoint_step``, ``checkpoint``, ``go_on``), with its time in
ISO 8601 (``time_utc``) beside the Unix one. Real launches, real signals, real checkpoints."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

import pytest

from launcher.mpi import detect_flavor
from tests.launcher.launch_cli import launch as run_launcher
from tests.launcher.real_children import mpiexec_or_skip
from tests.launcher.test_preempt_signals import ENV, JOB, LOCAL, MPI, child_pid, log
from tests.processes import job_env

#: the way on of a launch that names its run (``--job-id``): no id added
WAY_ON = (
    "once the cause is fixed, to go on with this run, give the same command (and --resume auto "
    "after --, where the program takes it)"
)


def _launch(tmp_path: Path, env: Mapping[str, str], how: tuple, *after: str) -> subprocess.Popen:
    """``distconv-launch`` (``how``: its command and sizes) of a long run on synthetic data
    (3 steps an epoch, a checkpoint at each epoch's end), ``after`` after its train arguments,
    its output in ``tmp_path``'s ``out.txt`` and ``err.txt``."""
    argv = [
        sys.executable, "-m", "launcher", *how, "--job-id", JOB, "--",
        "--data", "synthetic", "--epochs", "400", "--batch-size", "64", "--no-progress", *after,
    ]  # fmt: skip
    with open(tmp_path / "out.txt", "w") as out, open(tmp_path / "err.txt", "w") as err:
        return subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=out, stderr=err)


def _checkpoints(tmp_path: Path) -> Path:
    return tmp_path / "runs" / JOB / "train" / "checkpoints"


def _newest_on_disk(tmp_path: Path) -> tuple[int, Path]:
    """The step and chief part of the newest manifest in the run's folder whose parts all
    exist, read here from the files (not by the code under test)."""
    complete = []
    for manifest in _checkpoints(tmp_path).glob("step-*.json"):
        parts = json.loads(manifest.read_text())["parts"]
        if all((manifest.parent / part).is_file() for part in parts.values()):
            complete.append((int(manifest.stem.split("-")[1]), manifest.parent / parts["chief"]))
    assert complete, f"no complete checkpoint in {_checkpoints(tmp_path)}"
    return max(complete)


def _killed_after_checkpoints(
    tmp_path: Path, env: Mapping[str, str], marks: set[str], how: tuple, watched: str
) -> tuple[int, str]:
    """A :func:`_launch` (``how``) whose child with ``marks`` gets SIGKILL once the run kept two
    checkpoints: the launcher's status and stderr."""
    launcher = _launch(tmp_path, env, how)
    try:
        deadline = time.monotonic() + 90
        while len(list(_checkpoints(tmp_path).glob("step-*.json"))) < 2:
            assert launcher.poll() is None, (tmp_path / "err.txt").read_text()[-3000:]
            assert time.monotonic() < deadline, log(tmp_path, watched)[-3000:]
            time.sleep(0.02)
        os.kill(child_pid(env, marks), signal.SIGKILL)
        status = launcher.wait(90)
    finally:
        launcher.kill()
        launcher.wait()
    return status, (tmp_path / "err.txt").read_text()


def _assert_way_on(tmp_path: Path, err: str) -> int:
    """The report names the newest complete checkpoint and the way on, on stderr's last line
    and in ``failure.json``, whose ``time_utc`` is its ``time``: the checkpoint's step."""
    step, chief = _newest_on_disk(tmp_path)
    last = err.splitlines()[-1]
    assert last == (
        f"distconv-launch: the newest checkpoint kept is step {step} ({chief}); {WAY_ON}"
    ), err[-3000:]
    report = json.loads((tmp_path / "runs" / JOB / "failure.json").read_text())
    assert (report["checkpoint_step"], report["checkpoint"]) == (step, str(chief)), report
    assert report["go_on"] == WAY_ON.removeprefix("once the cause is fixed, "), report
    utc = report["time_utc"]
    assert utc.endswith("Z"), report
    assert datetime.fromisoformat(utc[:-1] + "+00:00").timestamp() == pytest.approx(
        report["time"], abs=0.001
    )
    return step


def _resumed_at(tmp_path: Path, env: Mapping[str, str], how: tuple, watched: str) -> str:
    """The way on the report gave, run: :func:`_launch`'s command with ``--resume auto`` after
    ``--``; the step its log says it resumed at (90 s at most), then SIGTERM to it."""
    launcher = _launch(tmp_path, env, how, "--resume", "auto")
    try:
        deadline = time.monotonic() + 90
        said = None
        while said is None and launcher.poll() is None and time.monotonic() < deadline:
            said = re.search(r"resumed from \S+ at step (\d+)", log(tmp_path, watched))
            time.sleep(0.02)
        launcher.send_signal(signal.SIGTERM)
        launcher.wait(90)
    finally:
        launcher.kill()
        launcher.wait()
    assert said is not None, log(tmp_path, watched)[-3000:]
    return said.group(1)


@pytest.mark.timeout(300)
def test_a_killed_shard_names_the_newest_checkpoint_and_its_way_on_resumes_there(tmp_path):
    with job_env(ENV) as env:
        marks = {"DISTCONV_ROLE=server", "RANK=0"}
        status, err = _killed_after_checkpoints(tmp_path, env, marks, LOCAL, "worker-0")
        assert status == 128 + signal.SIGKILL, err[-3000:]
        assert "server 0 failed with signal SIGKILL" in err, err[-3000:]
        step = _assert_way_on(tmp_path, err)
        assert _resumed_at(tmp_path, env, LOCAL, "worker-0") == str(step)


@pytest.mark.timeout(300)
def test_a_killed_mpi_rank_names_the_newest_checkpoint(tmp_path):
    mpich = detect_flavor(mpiexec_or_skip()) == "mpich"
    rank_1 = {"PMI_RANK=1"} if mpich else {"OMPI_COMM_WORLD_RANK=1"}
    with job_env(ENV) as env:
        status, err = _killed_after_checkpoints(tmp_path, env, rank_1, MPI, "mpiexec-0")
        assert status != 0, err[-3000:]  # how the headline names the rank is not this test's
        step = _assert_way_on(tmp_path, err)
        report = json.loads((tmp_path / "runs" / JOB / "failure.json").read_text())
        assert report["failed_rank"] == 1, report  # an alert's key: not a divergence's null
        assert _resumed_at(tmp_path, env, MPI, "mpiexec-0") == str(step)


@pytest.mark.timeout(120)
def test_a_job_that_failed_before_its_first_checkpoint_says_none_is_kept(tmp_path):
    """A launcher-chosen job id: the way on names it, as the same command alone would start a
    new run directory."""
    missing = tmp_path / "no-mnist"
    done = run_launcher(
        "local", "--workers", "1", "--servers", "0", "--",
        "--data", "mnist", "--data-dir", str(missing), "--epochs", "1", "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-3000:]
    (run_dir,) = (tmp_path / "runs").iterdir()
    job_id = run_dir.name
    way_on = (
        f"to go on with this run, give the same command --job-id {job_id} (and --resume auto "
        "after --, where the program takes it)"
    )
    assert done.stderr.splitlines()[-1] == (
        "distconv-launch: no checkpoint kept yet: --resume auto starts afresh; once the "
        f"cause is fixed, {way_on}"
    ), done.stderr[-3000:]
    report = json.loads((run_dir / "failure.json").read_text())
    assert (report["checkpoint_step"], report["checkpoint"], report["go_on"]) == (
        None,
        None,
        way_on,
    ), report
    assert not list((run_dir / "train").glob("checkpoints/step-*.json"))


def test_the_report_of_a_program_not_distconv_train_gives_the_way_on_alone(tmp_path):
    """Its checkpoints are not known: nothing is said of them, and the fields are null."""
    done = run_launcher(
        "local", "--workers", "1", "--servers", "0", "--run-dir", str(tmp_path / "r"), "--",
        sys.executable, "-c", "raise SystemExit(3)",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr[-3000:]
    assert done.stderr.splitlines()[-1] == f"distconv-launch: {WAY_ON}", done.stderr[-3000:]
    report = json.loads((tmp_path / "r" / "failure.json").read_text())
    assert (report["checkpoint_step"], report["checkpoint"]) == (None, None), report
