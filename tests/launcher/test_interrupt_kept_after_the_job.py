"""A stop signal that comes once the job has run is no stop of the launcher's last line.

A fix had the bounded last-line write (:func:`launcher.stderr_line.write_within`) give up at a
signal kept while the launcher is not armed, for argparse's usage error. But the launcher is
not armed after the job either (:func:`launcher.interrupt.taken_over`: a signal then is kept,
to be dropped): one that came as the supervisor gave the signals back cut the error line that
follows (``cannot start worker-1 ...``) at once, on a slow stderr, and the launcher exited 1
with no word of why."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import pytest

from tests.launcher.launch_cli import ENV, read_till_exit

#: the launcher's steps to its error line after a job: armed, taken over by the supervisor,
#: given back (a SIGTERM kept then), and the line on a stderr that is slow to read
AFTER_THE_JOB = """\
import os, signal, sys
from launcher import interrupt
from launcher.stderr_line import write_last
interrupt.defer()
interrupt.arm()
interrupt.taken_over()
os.kill(os.getpid(), signal.SIGTERM)
print("go", flush=True)
write_last("the error line")
"""


@pytest.mark.timeout(30)
def test_a_signal_kept_after_the_job_does_not_cut_the_error_line():
    read, write = os.pipe()
    try:
        fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, 4096)
        os.write(write, b"x" * 4096)  # full: the line waits for the reader below
        child = subprocess.Popen(
            [sys.executable, "-c", AFTER_THE_JOB], env=ENV, stdout=subprocess.PIPE, stderr=write
        )
        os.close(write)
        write = -1
        try:
            assert child.stdout.readline() == b"go\n"
            got, status = read_till_exit(read, child, 0.3, 10)  # 0.3: within the bound (1 s)
        finally:
            child.kill()
            child.stdout.close()
    finally:
        os.close(read)
        if write != -1:
            os.close(write)
    assert (status, got[4096:]) == (0, b"the error line\n")
