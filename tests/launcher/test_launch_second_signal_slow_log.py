"""A second stop signal does not make a slow log a hung one.

73246652 cut each child's own wait for its pump at a second stop signal, but the launcher
still judged a write to the log under way at the ask a hung file system, as after the whole
wait (5 s): a log write that a slow file system held 0.2 s was "a hung file system?", and the
end left that pipe undrained, so the log lacked most of what the pipe held (409 of 1000
lines). The log here is a FIFO read 4 KiB every 0.2 s: a slow file system, never a hung one."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.launcher.attempt_logs import without_markers
from tests.launcher.launch_cli import ENV, launcher_command, signal_taken, wait_while_running
from tests.processes import job_env, job_left

LINES = 1000
#: the window in which a signal repeats the first stop, short: the second, 0.1 s after the first,
#: asks to stop now while the slow log still holds the pump up
REPEATS_SHORT = {"module": "second_signal", "REPEAT_SECONDS": 0.05}
PRINTS_AND_WAITS = f"""\
import sys, time
for i in range({LINES}):
    sys.stdout.write("line %08d " % i + "x" * 15 + "\\n")
sys.stdout.flush()
time.sleep(60)
"""


def _read_slowly(fd: int, got: bytearray, stop: threading.Event) -> None:
    """The slow file system: 4 KiB of the log every 0.2 s, till ``stop``."""
    while not stop.is_set():
        try:
            got.extend(os.read(fd, 4096))
        except BlockingIOError:
            pass
        time.sleep(0.2)


@pytest.mark.timeout(60)
def test_a_second_signal_does_not_take_a_slow_log_for_a_hung_one(tmp_path: Path):
    (tmp_path / "prints.py").write_text(PRINTS_AND_WAITS)
    logs = tmp_path / "run" / "logs"
    logs.mkdir(parents=True)
    os.mkfifo(logs / "worker-0.log")
    fifo = os.open(logs / "worker-0.log", os.O_RDONLY | os.O_NONBLOCK)
    fcntl.fcntl(fifo, fcntl.F_SETPIPE_SZ, 4096)
    got, stop = bytearray(), threading.Event()
    reader = threading.Thread(target=_read_slowly, args=(fifo, got, stop))
    reader.start()
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "prints.py"]
    try:
        with job_env(ENV) as env, open(tmp_path / "stderr", "w+") as err:
            launcher = subprocess.Popen(
                [*launcher_command(**REPEATS_SHORT), *argv], env=env, cwd=tmp_path,
                stdout=subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
            try:  # the pump in a log write the reader holds up
                wait_while_running(lambda: len(got) >= 8192, launcher, "the log's first lines")
                signal_taken(launcher, signal.SIGTERM)  # the next: a second, not merged
                time.sleep(0.1)  # the stop under way
                launcher.send_signal(signal.SIGTERM)
                status = launcher.wait(timeout=30)
            finally:
                launcher.kill()
            assert job_left(env, 5) == {}
            err.seek(0)
            stderr = err.read()
        time.sleep(0.5)  # the reader's last looks: what the FIFO still holds
    finally:
        stop.set()
        reader.join(5)
        os.close(fifo)
    assert status == 128 + signal.SIGTERM, stderr
    assert "hung file system" not in stderr, stderr
    assert without_markers(got).count(b"\n") == LINES, (got.count(b"\n"), stderr)
