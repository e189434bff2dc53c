"""argparse's usage error on a stderr that stalls (a paused pager on ``2>``, a reader that died
without closing it), written within a bound (:class:`launcher.stderr_line.BoundedParser`).

k468: a SIGTERM that came while it was being written was kept (the launcher's stop signals are
not armed yet) and then dropped: the launcher waited the write's whole bound and exited 2, as
if nothing had stopped it. It now ends at once with 128 + the signal, as a stop signal at any
other moment before the job started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.launcher.launch_cli import ENV, launcher_command, stalled_pipe, wait_while_running
from tests.processes import job_env, job_left

#: a usage error of the launcher's own (argparse's: usage, then the ``error:`` line)
BOGUS = ["local", "--bogus", "--", "worker.py"]


def writing_to_a_pipe(pid: int) -> bool:
    """Whether a thread of process ``pid`` is blocked in a write to a pipe (its ``wchan``)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        return any("pipe_write" in Path(f"/proc/{pid}/task/{t}/wchan").read_text() for t in tasks)
    except OSError:  # it or a thread ended meanwhile
        return False


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_stop_signal_during_a_usage_error_on_a_stalled_stderr_ends_with_it(
    tmp_path: Path, signum: int
):
    with job_env(ENV) as env, stalled_pipe() as write:
        launcher = subprocess.Popen(
            [*launcher_command(), *BOGUS], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
            stderr=write,
        )  # fmt: skip
        try:
            wait_while_running(lambda: writing_to_a_pipe(launcher.pid), launcher, "the usage")
            sent = time.monotonic()
            launcher.send_signal(signum)
            status = launcher.wait(timeout=15)
            took = time.monotonic() - sent
        finally:
            launcher.kill()
        assert job_left(env, 5) == {}
    # the write given up at the signal, not after its bound (1 s, then the error line's)
    assert (status, took < 0.8) == (128 + signum, True), (status, took)
