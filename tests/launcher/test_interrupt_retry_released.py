"""A stop signal that lands inside an import is sent again a moment later
(:data:`launcher.interrupt.RETRY_SECONDS`); where the launcher, called as a function, has
given the signals back meanwhile (:func:`launcher.interrupt.release`, which drops what it
kept), that retry must not reach the caller's own handlers: SIGTERM's default killed the
process that called it, a SIGINT raised KeyboardInterrupt in its code."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.launcher.launch_cli import ENV

#: argv[1]: a folder holding ``signalled.py``, whose import sends its process argv[2]
SCRIPT = """
import sys, time
from launcher import interrupt

sys.path.insert(0, sys.argv[1])
interrupt.arm()
try:
    import signalled  # the signal lands in it: sent again once the import is done
finally:
    interrupt.release()  # the launcher returned before the retry
time.sleep(10 * interrupt.RETRY_SECONDS)
print("went on", flush=True)
"""
#: sends its process a signal and runs bytecodes (where the handler runs) inside its import
SIGNALLED = """
import os, signal, sys, time
os.kill(os.getpid(), int(sys.argv[2]))
until = time.monotonic() + 0.01
while time.monotonic() < until:
    pass
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum", [15, 2])
def test_a_retried_signal_does_not_outlive_release(tmp_path, signum):
    (tmp_path / "signalled.py").write_text(SIGNALLED)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), str(signum)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (0, "went on\n"), done
