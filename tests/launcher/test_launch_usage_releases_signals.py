"""A usage error of the launcher called as a function gives the stop signals back (k473).

In a process whose program is ``distconv-launch`` (the installed command, or a wrapper of
that name that calls :func:`launcher.cli.main`), ``import launcher`` keeps the stop signals
for ``main`` (:func:`launcher.interrupt.defer`). A usage error (argparse's, or a flag that
changes nothing) or ``--help`` raised SystemExit before the ``try`` whose ``finally`` gives
them back: the process went on with a handler that keeps a SIGTERM for good, and the next
SIGTERM stopped nothing."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.launcher.launch_cli import ENV

#: ``main(ARGV)`` caught, then a SIGTERM to itself: it must end the process
CALLER = """\
import os, signal, sys, time
sys.argv[0] = "/usr/local/bin/distconv-launch"
import launcher
from launcher.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(2)
print("SIGTERM kept: still running")
"""


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "argv",
    [
        ["local", "--bogus"],
        ["local", "--workers", "1", "--servers", "0", "--mode", "async", "--", "x.py"],
        ["k8s", "--help"],
    ],
    ids=["usage-error", "ignored-flag", "help"],
)
def test_a_usage_error_of_main_called_as_a_function_gives_the_signals_back(argv, tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", CALLER, *argv], env=ENV, cwd=tmp_path, capture_output=True,
        timeout=20,
    )  # fmt: skip
    assert done.returncode == -signal.SIGTERM, (done.returncode, done.stdout, done.stderr[-500:])


#: the caller sets its own SIGTERM handler after the import (whose defer() noted the default):
#: ``main(ARGV)`` must give that one back, not the default, nor replace it where it never
#: took it over (a usage error: k476)
OWN_HANDLER = CALLER.replace(
    "from launcher.cli import main\n",
    "from launcher.cli import main\nsignal.signal(signal.SIGTERM, lambda *_: os._exit(7))\n",
)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "argv",
    [
        ["local", "--bogus"],
        ["k8s", "--help"],
        ["local", "--workers", "1", "--servers", "0", "--", "missing.py"],
    ],
    ids=["usage-error", "help", "run"],
)
def test_main_called_as_a_function_gives_the_caller_s_own_handler_back(argv, tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", OWN_HANDLER, *argv], env=ENV, cwd=tmp_path, capture_output=True,
        timeout=20,
    )  # fmt: skip
    assert done.returncode == 7, (done.returncode, done.stdout, done.stderr[-500:])
