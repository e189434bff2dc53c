"""A stop of ``distconv-launch local`` leaves alone what a worker started that left its process
group: only mpiexec's own (its ``ssh``, Hydra's proxies and ranks) is killed at the stop's end.

The docs say a process that leaves its group (``setsid``, a daemon) is out of the launcher's
reach. A stop SIGKILLed such a helper of a worker (an upload started in a session of its own,
meant to finish by itself) as soon as the worker's group was gone, with no SIGTERM before,
while the same helper ran on after a job that ended by itself: so each stop cut it short."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.launcher.launch_cli import ENV, start_unread, stderr_once_gone, stop_when
from tests.launcher.real_children import wait_until
from tests.processes import job_env

#: a worker that starts a helper in a session of its own, which says it is there (``.ready``,
#: from the new session: the stop must not find it still in the worker's group) and finishes
#: a second later by itself (``.helper``: ``done``); the worker waits for its SIGTERM
WORKER = """#!/bin/sh
trap 'exit 143' TERM
setsid sh -c ': > "$0.ready"; sleep 1; echo done > "$0.helper"' "$0" </dev/null >/dev/null 2>&1 &
while :; do sleep 0.05; done
"""


@pytest.mark.timeout(60)
def test_a_stop_leaves_a_workers_helper_in_a_session_of_its_own(tmp_path: Path):
    worker = tmp_path / "worker.sh"
    worker.write_text(WORKER)
    worker.chmod(0o755)
    ready, helper = Path(f"{worker}.ready"), Path(f"{worker}.helper")
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", str(worker)]
    with job_env(ENV) as env:
        with open(tmp_path / "stderr", "w+") as err:
            launcher = start_unread(argv, env, tmp_path, err)
            status, _ = stop_when(ready.exists, launcher, "the worker's start")
            assert status == 128 + signal.SIGTERM
            wait_until(helper.exists, "the helper's own end", 10)
            stderr = stderr_once_gone(env, err)  # the helper too, once it has finished
    assert helper.read_text() == "done\n", stderr
