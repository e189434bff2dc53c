"""The lines a child's pump passes on once the launcher's output takes no more (at the job's
end: the writer ended, or the view shut after a slow reader) are counted and said:
they reached the child's log alone, and nothing the launcher said counted them, so its output
lacked them unsaid. Counted, not drained: the end's wait on the output is bounded already, and
a pump that comes that late (a pipe the output held up, one a stray holds) may never end."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest

from tests.launcher.launch_cli import (
    ENV,
    launcher_command,
    read_slowly,
    start_unread,
    stderr_once_gone,
)
from tests.launcher.test_launch_end_drain import LINES, PRINTS
from tests.processes import job_env


def _read_slowly_into(stream, into: list[bytes], stop: threading.Event) -> None:
    """Take the launcher's stdout 4 KiB every 0.5 s (it moves: nothing dropped), into ``into``."""
    while not stop.is_set() and (chunk := stream.read1(4096)):
        into.append(chunk)
        time.sleep(0.5)


@pytest.mark.timeout(60)
def test_the_lines_that_came_after_the_output_ended_are_counted(tmp_path: Path):
    (tmp_path / "prints.py").write_text(PRINTS)
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "prints.py"]
    got: list[bytes] = []
    with job_env(ENV) as env, open(tmp_path / "stderr", "w+") as err:
        command = launcher_command(OUTPUT_DRAIN_SECONDS=0.5)  # its waits on the output, cut
        launcher = start_unread(argv, env, tmp_path, err, command)
        with read_slowly(launcher, _read_slowly_into, got) as reader:
            status = launcher.wait(timeout=30)
            reader.end()
            got.append(launcher.stdout.read())  # what the pipe still holds: written, shown
        stderr = stderr_once_gone(env, err)
    assert status == 0, stderr
    total = LINES + 1  # the log has them all (test_launch_end_drain)
    shown = b"".join(got).count(b"\n")
    queued = re.search(r"so it lacks (\d+) line\(s\) of worker-0 ", stderr)  # at the close
    late = re.search(r"so it lacks (\d+) line\(s\) of worker-0 .*, which came after", stderr)
    assert late is not None, stderr
    # every line shown, queued at the end, or counted as late; late ones never shown
    assert shown + int(queued[1]) + int(late[1]) >= total, (shown, stderr)
    assert shown + int(late[1]) <= total, (shown, stderr)
