"""A stop signal handled while :func:`launcher.interrupt.release` gives the signals back (the
launch ending, here refused before its job) is dropped with what the launcher kept: raised
there, out of ``cli.main``'s finally, it replaced the launch's status and one line with a
``KeyboardInterrupt`` traceback (``distconv-launch``) or an exception in the caller's code
(``distconv.launch.main`` called as a function)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.launcher.launch_cli import ENV

#: a launch refused before its job (no such mpiexec), whose release() is signalled at its
#: first call (taking the retries' lock), where CPython runs the pending handler; its status
SCRIPT = """
import os, signal
from launcher import cli, interrupt

class Signalled:  # the retries' lock, whose taking is where the signal is handled
    def __init__(self, lock):
        self.lock = lock

    def __enter__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        return self.lock.__enter__()

    def __exit__(self, *exc):
        return self.lock.__exit__(*exc)

interrupt._retrying = Signalled(interrupt._retrying)
mpi = ["mpi", "-np", "1", "--mpiexec", "/nonexistent/mpiexec", "--run-dir", "run"]
print(cli.main([*mpi, "--", "true"]), flush=True)
print("went on", flush=True)
"""


@pytest.mark.timeout(60)
def test_a_signal_as_the_launcher_gives_the_signals_back_keeps_its_status(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=ENV,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (0, "1\nwent on\n"), done
    assert done.stderr == (
        "distconv-launch mpi: error: --mpiexec '/nonexistent/mpiexec' is not an executable\n"
    ), done.stderr
