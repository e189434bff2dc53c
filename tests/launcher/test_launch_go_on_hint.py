"""A launch stopped by Ctrl-C or SIGTERM says how to go on with that run. Where the launcher
chose the job id, the same command again picks a new one, so a new, empty run directory, where
``--resume`` finds no checkpoint (an operator had to dig the id out of the launch's first line);
where the command names its run, the same command needs ``--resume auto`` after ``--``."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launcher.launch_cli import ENV, launcher_command, wait_while_running
from tests.processes import job_env


def _stopped(tmp_path: Path, signum: int, *own: str) -> tuple[int, str]:
    """Launch one worker that waits, send the launcher ``signum`` once it runs; its status and
    stderr (``own``: options of the launch, before ``--``)."""
    up = tmp_path / "up"
    program = [
        sys.executable,
        "-c",
        f"import pathlib, time; pathlib.Path({str(up)!r}).touch(); time.sleep(60)",
    ]
    argv = [*launcher_command(), "local", "--workers", "1", "--servers", "0", *own, "--", *program]
    with job_env(ENV) as env:
        launcher = subprocess.Popen(
            argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            wait_while_running(up.exists, launcher, "the worker's start", limit=60)
            launcher.send_signal(signum)
            _, stderr = launcher.communicate(timeout=60)
        finally:
            launcher.kill()
            launcher.wait()
    return launcher.returncode, stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_launch_says_the_job_id_to_go_on_with(tmp_path, signum):
    status, stderr = _stopped(tmp_path, signum)
    assert status == 128 + signum, stderr
    job_id = stderr.split("job ", 1)[1].split(":", 1)[0]  # its first line: "job ID: 1 worker(s)"
    hint = f"to go on with this run, give the same command --job-id {job_id} (and --resume auto"
    assert stderr.splitlines()[-1].startswith(f"distconv-launch: {hint}"), stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("own", [("--job-id", "mine"), ("--run-dir", "rd")])
def test_a_launch_that_names_its_run_says_the_same_command_with_resume_auto(tmp_path, own):
    """It said nothing, and the same command again was refused: the run directory holds a run,
    and ``--resume`` was missing after ``--``. The command names its run: no ``--job-id`` added."""
    status, stderr = _stopped(tmp_path, signal.SIGINT, *own)
    assert status == 130, stderr
    hint = (
        "to go on with this run, give the same command (and --resume auto after --, where the "
        "program takes it)"
    )
    assert stderr.splitlines()[-1] == f"distconv-launch: {hint}", stderr


@pytest.mark.timeout(120)
def test_a_worker_that_exits_130_itself_gets_no_hint(tmp_path):
    """The hint followed any launch whose status was 130 or 143, so a worker that exited 130
    (or died of SIGTERM) on its own, the launcher never signalled, was told how to go on as
    after a stop; it is told as after any failure: once the cause is fixed."""
    argv = [
        *launcher_command(),
        "local",
        "--workers",
        "1",
        "--servers",
        "0",
        "--",
        "sh",
        "-c",
        "exit 130",
    ]
    with job_env(ENV) as env:
        done = subprocess.run(
            argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
    assert "worker 0 failed" in done.stderr, done.stderr
    assert "checkpointed stop" not in done.stderr, done.stderr  # a failure, not a stop:
    # its way on is a failure's, once the cause is fixed
    way_on = done.stderr.splitlines()[-1]
    assert way_on.startswith("distconv-launch: once the cause is fixed, to go on"), done.stderr
