"""A second stop signal cuts the launcher's end short (k468). After the first, the end waits,
bounded, for a slow output to take the queued lines (``OUTPUT_DRAIN_SECONDS`` per wait) and
for the held pipes to drain into the logs (2 s): a second one, as a second Ctrl-C during the
stop, means "stop now", and the launcher waited those out all the same."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from tests.launcher.launch_cli import ENV, launcher_command, start_unread, wait_while_running
from tests.launcher.test_launch_end_drain import PRINTS, _read_slowly
from tests.processes import job_env, job_left

#: a worker that fills every queue on the way (:data:`PRINTS`), then waits to be stopped
PRINTS_AND_WAITS = f"{PRINTS}import sys, time\nsys.stdout.flush()\ntime.sleep(60)\n"
#: the product's waits on the output, cut in the test, still far past the bound below
DRAIN = 3.0


@pytest.mark.timeout(60)
def test_a_second_signal_cuts_the_end_s_waits_on_a_slow_output(tmp_path: Path):
    (tmp_path / "prints.py").write_text(PRINTS_AND_WAITS)
    log = tmp_path / "run" / "logs" / "worker-0.log"
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "prints.py"]
    stop = threading.Event()
    with job_env(ENV) as env, open(tmp_path / "stderr", "w+") as err:
        launcher = start_unread(
            argv, env, tmp_path, err, launcher_command(OUTPUT_DRAIN_SECONDS=DRAIN)
        )
        reader = threading.Thread(target=_read_slowly, args=(launcher.stdout, stop))
        reader.start()
        try:  # its last line in the log: every queue on the way is full
            wait_while_running(
                lambda: log.exists() and b"the last line" in log.read_bytes(), launcher, "it"
            )
            launcher.send_signal(signal.SIGTERM)
            time.sleep(0.2)  # the stop under way
            second = time.monotonic()
            launcher.send_signal(signal.SIGTERM)
            status = launcher.wait(timeout=30)
            took = time.monotonic() - second
        finally:
            stop.set()
            launcher.kill()
            reader.join(5)
            launcher.stdout.close()
        assert job_left(env, 5) == {}
        err.seek(0)
        stderr = err.read()
    assert status == 128 + signal.SIGTERM, stderr
    # the child's own wait on its pump (launcher.child, up to DRAIN) may still run; the
    # queue's (DRAIN, twice) and the pipes' (2 s) no longer do
    assert took < DRAIN + 1.5, (took, stderr)
