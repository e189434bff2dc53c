"""A :func:`launcher.process_group.watched` child's watchdog kills its group at the end of file
of a pipe only the launcher writes to: its ends must not be the launcher's std streams."""

from __future__ import annotations

import sys

from tests.launcher.launch_cli import ENV
from tests.processes import job_left, run_job

#: in a launcher started with stdout and stderr closed: the watched pipe's ends and which of
#: fds 1 and 2 are open after it is made, then the status of a ``kill_group`` query (it marks
#: its start, then sleeps) during which a thread writes to fd 2, as a C library's warning does
#: (nowhere, fd 2 closed); all written to the file argv[1]
CLOSED_STD = """
import os, sys, threading, time
from launcher.interrupt import run_captured
from launcher.process_group import watched

result, started = sys.argv[1], sys.argv[1] + ".started"

def is_open(fd):
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True

_, *ends = watched(["true"])
low = [fd for fd in (1, 2) if is_open(fd)]
for end in ends:
    os.close(end)

def warn():  # once the query runs
    while not os.path.exists(started):
        time.sleep(0.001)
    try:
        os.write(2, b"a warning\\n")
    except OSError:
        pass

threading.Thread(target=warn, daemon=True).start()
done = run_captured(["sh", "-c", 'touch "$1" && sleep 0.5', "_", started], kill_group=True)
with open(result, "w") as file:
    file.write(f"{min(ends) >= 3} {low} {done.returncode}")
"""


def test_a_launcher_without_stdout_and_stderr_keeps_the_watchdogs_pipe_off_them(tmp_path):
    """Started with ``>&- 2>&-``, the launcher got the pipe as fds 1 and 2: a write to its
    stderr went into the pipe, and the watchdog killed the query's group at once (a pyenv
    asked got SIGKILL, the shim taken for a program of the user's). Its ends are moved to fd 3
    and above, the low ones closed."""
    result = tmp_path / "result"
    closed = ["/bin/sh", "-c", 'exec "$@" >&- 2>&-', "sh", sys.executable, "-c", CLOSED_STD]
    done = run_job([*closed, str(result)], env=ENV, timeout=20)
    assert done.returncode == 0, done
    assert result.read_text() == "True [] 0"
    assert job_left(done.env, 3.0) == {}
