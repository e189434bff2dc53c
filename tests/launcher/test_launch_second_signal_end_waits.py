"""A second stop signal cuts the launcher's end short. After the first, the end waits,
bounded, for a slow output to take the queued lines (``OUTPUT_DRAIN_SECONDS`` per wait): a
second one, as a second Ctrl-C during the stop, means "stop now", and the launcher waited
those out all the same; so it did each child's own wait for its pump, which the slow output
held up. (The held pipes' drain into the logs is not cut: the record.)"""

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
from tests.launcher.test_launch_end_drain import LINES, PRINTS, _read_slowly
from tests.processes import job_env

#: a worker that fills every queue on the way (:data:`PRINTS`), then waits to be stopped
PRINTS_AND_WAITS = f"{PRINTS}import sys, time\nsys.stdout.flush()\ntime.sleep(60)\n"
#: the lines the launcher's queue and its stdout pipe hold (111 bytes each on the output)
QUEUED = (QUEUE_BYTES + 64 * 1024) // 111
#: the product's waits on the output, cut in the test, still far past the bound below
DRAIN = 3.0


@pytest.mark.timeout(60)
def test_a_second_signal_cuts_the_end_s_waits_on_a_slow_output(tmp_path: Path):
    (tmp_path / "prints.py").write_text(PRINTS_AND_WAITS)
    log = tmp_path / "run" / "logs" / "worker-0.log"
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "prints.py"]
    with job_env(ENV) as env, open(tmp_path / "stderr", "w+") as err:
        launcher = start_unread(
            argv, env, tmp_path, err, launcher_command(OUTPUT_DRAIN_SECONDS=DRAIN)
        )
        with read_slowly(launcher, _read_slowly):
            # the queue and stdout's pipe full: the pump waits for room, its pipe fills
            wait_while_running(  # (once its last line is in the log, its pump is not held)
                lambda: log.exists() and logged(log).count(b"\n") >= QUEUED, launcher, "it"
            )
            time.sleep(0.3)
            signal_taken(launcher, signal.SIGTERM)  # taken: the next one is a second, not merged
            time.sleep(REPEAT_SECONDS + 0.2)  # the stop under way; past a repeat's window
            second = time.monotonic()
            launcher.send_signal(signal.SIGTERM)
            status = launcher.wait(timeout=30)
            took = time.monotonic() - second
        stderr = stderr_once_gone(env, err)
    assert status == 128 + signal.SIGTERM, stderr
    # none of the waits on the slow output runs on: the child's own on its pump
    # (launcher.child, DRAIN), the queue's (DRAIN, twice)
    assert took < 2.0, (took, stderr)
    assert logged(log).count(b"\n") == LINES + 1, stderr  # the log whole all the same
