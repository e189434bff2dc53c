"""A launcher whose stderr alone is a stalled pipe (stdout elsewhere) still supervises its job.

Its messages went straight to stderr: with the pipe full (a paused pager on ``2>`` only, a
reader that died without closing it), the supervisor blocked for good on its next message
(here, the restart's) while its children ran on unsupervised; a SIGTERM was noted, never acted
on. Now they go through a bounded queue of their own, written by a thread, which a stall drops
from: the SIGTERM ends the launcher at once, failure.json written.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.launcher.launch_cli import (
    ENV,
    fill_pipe,
    launcher_command,
    stop_when,
    wait_while_running,
)
from tests.processes import job_env, job_left

#: worker 0 fails once the test has filled the launcher's stderr; worker 1 outlasts its SIGTERM
#: (said in a file), so the launcher has its grace's kill to say; it says when its handler is
#: in ("ready"), and the test fills the pipe and lets worker 0 fail only then: on a loaded host
#: worker 1 was still starting, its SIGTERM's default ended it, and the launcher with it
WORKER = """\
import os, pathlib, signal, time
if os.environ["RANK"] == "0":
    while not pathlib.Path("go").exists():
        time.sleep(0.01)
    raise SystemExit(3)
signal.signal(signal.SIGTERM, lambda *_: pathlib.Path("termed").touch())
pathlib.Path("ready").touch()
while True:
    time.sleep(1)
"""


@pytest.mark.timeout(60)
def test_a_stalled_stderr_holds_no_message_of_the_supervisor(tmp_path: Path):
    (tmp_path / "worker.py").write_text(WORKER)
    argv = ["local", "--workers", "2", "--servers", "0"]
    argv += ["--grace", "2", "--run-dir", "run", "--", "worker.py"]
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)  # little to fill
    os.set_blocking(read, False)
    said = bytearray()

    def take() -> bytes:
        try:
            said.extend(os.read(read, 65536))
        except BlockingIOError:
            pass
        return bytes(said)

    with job_env(ENV) as env, open(tmp_path / "stdout", "wb") as out:
        launcher = subprocess.Popen(
            [*launcher_command(), *argv], env=env, cwd=tmp_path, stdout=out, stderr=write
        )
        try:
            started = lambda: b"logs in " in take() and said.endswith(b"\n")  # noqa: E731
            wait_while_running(started, launcher, "the job's first line", 20)
            ready = (tmp_path / "ready").exists
            wait_while_running(ready, launcher, "worker 1's handler", 20)  # the job started:
            take()  # the launcher's lines before its start, read
            fill_pipe(write)  # nothing reads it from now on
            (tmp_path / "go").touch()  # worker 0 fails: the others are stopped
            termed = tmp_path / "termed"  # then a SIGTERM within the grace: it blocked there
            status, took = stop_when(termed.exists, launcher, "worker 1's SIGTERM", 10)
        finally:
            launcher.kill()
            os.close(write)
        assert job_left(env, 5) == {}
    os.set_blocking(read, True)
    with os.fdopen(read, "rb") as rest:  # what it wrote at its end, a writer blocked: no error
        assert b"Fatal Python error" not in rest.read()
    assert status == 143 and took < 5, (status, took, bytes(said))
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 0, 3), report
    assert report["then"] == "stopped by SIGTERM", report


@pytest.mark.timeout(60)
def test_a_stderr_stalled_before_the_job_holds_up_no_job(tmp_path: Path):
    """Its lines before the job ('job ...: 1 worker(s) ...') were written straight to a stderr
    already full: the launcher hung there for good, no child started, and a SIGTERM did not
    end it (its own line on the stop blocked as well). Now they are queued too."""
    (tmp_path / "worker.py").write_text("print('done')\n")
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "worker.py"]
    read, write = os.pipe()
    fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)
    fill_pipe(write)  # nothing reads it, from the start
    with job_env(ENV) as env, open(tmp_path / "stdout", "wb") as out:
        launcher = subprocess.Popen(
            [*launcher_command(), *argv], env=env, cwd=tmp_path, stdout=out, stderr=write
        )
        try:
            status = launcher.wait(timeout=10)
        finally:
            launcher.kill()
            os.close(write)
        assert job_left(env, 5) == {}
    os.close(read)
    assert status == 0
    assert (tmp_path / "stdout").read_text() == "[worker 0] done\n"
