"""A shard restarted by ``distconv-launch local`` logs no probe for the last attempt's dials.

After a shard was killed, the dying attempt's workers kept dialing its port until they were
stopped, and the kernel queued those connections on the launcher's reserved socket. The next
attempt's shard accepted them first and logged, once per worker, "refused a connection from
an unknown address: its handshake ended early (a peer without CURVE, a port scan, a probe?)":
a security warning in the incident's log for the launcher's own leftovers. A real launch of
two workers and one shard, whose shard is SIGKILLed mid-training.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.launcher.launch_cli import ENV, launcher_command, wait_while_running
from tests.launcher.test_launch_lost_worker import shard_pid
from tests.processes import job_env, job_left

PROBE = "its handshake ended early"


@pytest.mark.timeout(180)
def test_the_restarted_shard_takes_no_connection_of_the_attempt_before(tmp_path: Path):
    run = tmp_path / "run"
    argv = [*launcher_command(), "local", "--workers", "2", "--servers", "1",
            "--max-restarts", "1", "--run-dir", str(run), "--",
            "--data", "synthetic", "--epochs", "30", "--no-progress"]  # fmt: skip
    worker_log = run / "logs" / "worker-0.log"
    with job_env(ENV) as env:
        launcher = subprocess.Popen(
            argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        try:
            trained = lambda: worker_log.exists() and "epoch 2/" in worker_log.read_text()  # noqa: E731
            wait_while_running(trained, launcher, "second epoch", limit=90)
            os.kill(shard_pid(run), signal.SIGKILL)
            said, _ = launcher.communicate(timeout=120)
        finally:
            if launcher.poll() is None:
                launcher.kill()
                launcher.communicate()
        assert job_left(env, 5) == {}
    assert launcher.returncode == 0, said
    assert "restarting the job (1 of 1)" in said, said
    assert "finished after 1 restart(s)" in said, said
    assert PROBE not in (run / "logs" / "server-0.log").read_text()
    assert PROBE not in said
