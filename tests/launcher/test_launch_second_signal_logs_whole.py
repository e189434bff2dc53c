"""A second stop signal cuts the launcher's end short on its output's view, never on the
logs: the end's drain of the pipes its output held up into the children's logs gave
up at once at a second signal, and the daemon pumps died with the launcher, so a log lacked
the lines the pipe still held. The log is the record; the drain is bounded already (2 s)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from launcher.second_signal import REPEAT_SECONDS
from launcher.terminal import QUEUE_BYTES
from tests.launcher.attempt_logs import logged
from tests.launcher.launch_cli import (
    ENV,
    launcher_command,
    read_slowly,
    signal_taken,
    start_unread,
    stderr_once_gone,
    wait_while_running,
)
from tests.launcher.test_launch_end_drain import _read_slowly
from tests.processes import job_env

#: short lines (30 bytes; 41 behind ``[worker 0] ``) that fill the launcher's queue and its
#: stdout pipe, then 600 KiB more in the child's pipe of 1 MiB (``F_SETPIPE_SZ``): many lines
#: for the pump to pass into the log at the end, more than a 0.05 s look lets it
QUEUED = (QUEUE_BYTES + 64 * 1024) // 41
LINES = QUEUED + 600 * 1024 // 30
PRINTS_AND_WAITS = f"""\
import fcntl, sys, time
fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ
for i in range({LINES}):
    sys.stdout.write(f"line {{i:08d}} " + "x" * 15 + "\\n")
print("the last line")
sys.stdout.flush()
time.sleep(60)
"""


@pytest.mark.timeout(60)
def test_a_second_signal_leaves_the_log_whole(tmp_path: Path):
    (tmp_path / "prints.py").write_text(PRINTS_AND_WAITS)
    log = tmp_path / "run" / "logs" / "worker-0.log"
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "prints.py"]
    with job_env(ENV) as env, open(tmp_path / "stderr", "w+") as err:
        # its waits on the output, cut: still under way past a repeat's window
        command = launcher_command(OUTPUT_DRAIN_SECONDS=REPEAT_SECONDS + 2.0)
        launcher = start_unread(argv, env, tmp_path, err, command)
        with read_slowly(launcher, _read_slowly):
            # the queue full: the pump waits for room, the child's pipe fills behind it
            wait_while_running(
                lambda: log.exists() and logged(log).count(b"\n") >= QUEUED, launcher, "it"
            )
            time.sleep(0.5)
            signal_taken(launcher, signal.SIGTERM)  # taken: the next one is a second, not merged
            time.sleep(REPEAT_SECONDS + 0.05)  # before the end: the stop under way
            launcher.send_signal(signal.SIGTERM)
            status = launcher.wait(timeout=30)
        stderr = stderr_once_gone(env, err)
    assert status == 128 + signal.SIGTERM, stderr
    lines = logged(log).splitlines()
    assert (len(lines), lines[-1]) == (LINES + 1, b"the last line"), (len(lines), stderr)
    assert "was not drained" not in stderr, stderr
