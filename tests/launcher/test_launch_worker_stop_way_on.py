"""A worker's own SIGTERM (a preemption agent's, not the launcher's) with ``--overwrite``
after ``--``: the way on said to give the same command, which deleted the checkpoint the stop
had just written, and with ``--resume auto`` added it was refused (``--resume or --overwrite,
not both``). It now says ``--resume auto`` in its place, as the launcher's own stop does, and
that command goes on from the checkpoint. Real workers, real signals."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.launcher.test_launch_own_stop_way_on import COMMAND
from tests.launcher.test_preempt_signals import ENV, ended, log, signal_child
from tests.processes import job_env

#: the one worker of :data:`COMMAND`
WORKER = {"DISTCONV_ROLE=worker", "RANK=0"}


def _launch(tmp_path: Path, env: dict[str, str], *after: str) -> subprocess.Popen:
    """:data:`COMMAND` with ``after`` appended, its stderr in ``tmp_path``'s ``err.txt``."""
    with open(tmp_path / "err.txt", "w") as err:
        return subprocess.Popen(
            [*COMMAND, *after], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=err
        )


def _resumed(tmp_path: Path, env: dict[str, str], launcher: subprocess.Popen) -> bool:
    """Whether ``launcher``'s worker said it resumed (60 s at most), then SIGTERM to it."""
    deadline = time.monotonic() + 60
    while "resumed from" not in log(tmp_path, "worker-0") and launcher.poll() is None:
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    launcher.send_signal(signal.SIGTERM)
    launcher.wait(90)
    return "resumed from" in log(tmp_path, "worker-0")


@pytest.mark.timeout(240)
def test_a_workers_own_stop_under_overwrite_says_resume_auto_in_its_place(tmp_path):
    with job_env(ENV) as env:
        launcher = _launch(tmp_path, env, "--overwrite")
        try:
            signal_child(tmp_path, env, launcher, WORKER)
            status, err = ended(launcher, tmp_path)
        finally:
            launcher.kill()
            launcher.wait()
        assert status == 143, err[-3000:]
        assert "a checkpointed stop, not a crash: worker 0 got SIGTERM itself" in err, err[-3000:]
        assert err.splitlines()[-1].endswith(
            "give the same command with --resume auto in place of --overwrite after -- "
            "(--overwrite deletes the run)"
        ), err[-3000:]

        launcher = _launch(tmp_path, env, "--resume", "auto")  # the way on it gave
        try:
            assert _resumed(tmp_path, env, launcher), (tmp_path / "err.txt").read_text()[-3000:]
        finally:
            launcher.kill()
            launcher.wait()
