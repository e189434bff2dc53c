"""A stop signal handled while :func:`launcher.interrupt.release` gives the signals back (the
launch ending, here refused before its job) is dropped with what the launcher kept: raised
there, out of ``cli.main``'s finally, it replaced the launch's status and one line with a
``KeyboardInterrupt`` traceback (``distconv-launch``) or an exception in the caller's code
(``distconv.launch.main`` called as a function). So is one handled at release()'s entry,
where CPython checks for a pending signal at every Python call, still armed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.launcher.launch_cli import ENV

#: what every case runs: a launch refused before its job (no such mpiexec), then its status and
#: whether SIGTERM's handler is the caller's again
LAUNCH = """
mpi = ["mpi", "-np", "1", "--mpiexec", "/nonexistent/mpiexec", "--run-dir", "run"]
print(cli.main([*mpi, "--", "true"]), flush=True)
print("went on", signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, flush=True)
"""

#: release() signalled at its first call (taking the retries' lock), where CPython runs the
#: pending handler
IN_RELEASE = """
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
"""

#: release() signalled as it is called: the pending handler runs at its entry, before its
#: first line (a profile hook's own call is where it runs here)
AT_ENTRY = """
import os, signal, sys
from launcher import cli, interrupt

def signal_at_release(frame, event, _arg):
    if event == "call" and frame.f_code is interrupt.release.__code__:
        sys.setprofile(None)
        os.kill(os.getpid(), signal.SIGTERM)

sys.setprofile(signal_at_release)
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signalled", [IN_RELEASE, AT_ENTRY], ids=["in", "at-entry"])
def test_a_signal_as_the_launcher_gives_the_signals_back_keeps_its_status(tmp_path, signalled):
    done = subprocess.run(
        [sys.executable, "-c", signalled + LAUNCH],
        env=ENV,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (0, "1\nwent on True\n"), done
    assert done.stderr == (
        "distconv-launch mpi: error: --mpiexec '/nonexistent/mpiexec' is not an executable\n"
    ), done.stderr
