"""A launcher whose stdout and stderr are one stalled pipe (``2>&1`` into a paused pager) still
supervises its job.

The children's lines went through a queue that a stall drops from, but the launcher's own
messages were written straight to stderr: on the same stalled pipe, the supervisor blocked
for good on its next one, and a SIGTERM was noted but never acted on: the launcher never
ended. Now the messages go through the same queue there.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.launcher.launch_cli import ENV, start_unread, stop_when
from tests.launcher.test_launch_stalled_stdout import PRINTS
from tests.processes import job_env, job_left

#: worker 0 fills the launcher's output and fails; worker 1 outlasts its SIGTERM (said in a
#: file), so the launcher has its grace's kill to say
FAILS_OR_HOLDS_ON = f"""\
import os, signal, time
if os.environ["RANK"] == "0":
{textwrap.indent(PRINTS, "    ")}
    raise SystemExit(3)
signal.signal(signal.SIGTERM, lambda *_: open("termed", "w").close())
while True:
    time.sleep(1)
"""


@pytest.mark.timeout(60)
def test_a_stalled_shared_output_holds_no_message_of_the_supervisor(tmp_path: Path):
    """Worker 0 fails while the output stalls; the launcher, stopping worker 1, gets SIGTERM:
    it blocked for good on its message of the grace's kill; now it exits 143 at once after
    the grace (1 s), failure.json written."""
    (tmp_path / "prints.py").write_text(FAILS_OR_HOLDS_ON)
    argv = ["local", "--workers", "2", "--servers", "0", "--grace", "1", "--run-dir", "run"]
    argv += ["--", "prints.py"]
    with job_env(ENV) as env:
        launcher = start_unread(argv, env, tmp_path, subprocess.STDOUT)
        try:  # the pipe unread all along
            termed = tmp_path / "termed"
            status, took = stop_when(termed.exists, launcher, "worker 1's SIGTERM")
        finally:
            launcher.kill()
        assert job_left(env, 5) == {}
    assert status == 143 and took < 5, (status, took)
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert (report["role"], report["rank"], report["exit_code"]) == ("worker", 0, 3), report
    assert report["then"] == "stopped by SIGTERM", report
