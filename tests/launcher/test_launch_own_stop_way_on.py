"""A launcher stopped by SIGTERM whose command named its run (``--job-id``) ended with no way on,
and the same command again was refused: its workers' ``distconv train`` found the run directory
holding a run, without ``--resume`` after ``--``. Its last line now gives the way on, and the
command it gives goes on from the stop's checkpoint. Real workers, real signals."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.launcher.test_preempt_signals import ENV, JOB, log
from tests.processes import job_env

#: the launch's command: one worker, no shards (the cheapest real job that checkpoints on its
#: stop), its run named by --job-id, training far longer than the test waits
COMMAND = (
    sys.executable, "-m", "launcher", "local", "--workers", "1", "--servers", "0",
    "--job-id", JOB, "--", "--data", "synthetic", "--epochs", "400", "--batch-size", "64",
    "--no-progress",
)  # fmt: skip
WAY_ON = (
    "distconv-launch: to go on with this run, give the same command (and --resume auto after "
    "--, where the program takes it)"
)


def _stopped_when(tmp_path: Path, said: str, *after: str) -> tuple[int, str]:
    """:data:`COMMAND` with ``after`` appended, SIGTERM to the launcher once its worker's log
    holds ``said``: the launcher's status and stderr."""
    with job_env(ENV) as env, open(tmp_path / "err.txt", "w") as err:
        launcher = subprocess.Popen(
            [*COMMAND, *after], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err
        )
        try:
            deadline = time.monotonic() + 60
            while said not in log(tmp_path, "worker-0"):
                assert launcher.poll() is None, (tmp_path / "err.txt").read_text()[-3000:]
                assert time.monotonic() < deadline, log(tmp_path, "worker-0")[-3000:]
                time.sleep(0.02)
            launcher.send_signal(signal.SIGTERM)
            status = launcher.wait(90)
        finally:
            launcher.kill()
            launcher.wait()
    return status, (tmp_path / "err.txt").read_text()


@pytest.mark.timeout(200)
def test_a_signalled_launch_that_named_its_run_gives_a_way_on_that_goes_on(tmp_path):
    status, err = _stopped_when(tmp_path, "epoch 1/")
    assert status == 143, err[-3000:]
    assert err.splitlines()[-1] == WAY_ON, err[-3000:]

    status, err = _stopped_when(tmp_path, "resumed from", "--resume", "auto")  # the way on
    assert status == 143, err[-3000:]
    assert "RunDirError" not in err, err[-3000:]


@pytest.mark.timeout(120)
def test_the_way_on_of_a_launch_that_overwrote_its_run_drops_overwrite(tmp_path):
    """With ``--overwrite`` after ``--``, the way on said to give the same command, which
    deleted the run the stop had checkpointed, and with ``--resume auto`` added it was refused
    (``--resume or --overwrite, not both``). It says ``--resume auto`` in its place."""
    status, err = _stopped_when(tmp_path, "epoch 1/", "--overwrite")
    assert status == 143, err[-3000:]
    assert err.splitlines()[-1] == (
        "distconv-launch: to go on with this run, give the same command with --resume auto in "
        "place of --overwrite after -- (--overwrite deletes the run)"
    ), err[-3000:]
