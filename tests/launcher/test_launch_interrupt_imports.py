"""A Ctrl-C while the launcher imports (numpy for a train job's flags, after its handler is
armed) ends the launch on its one line and 130, never a traceback of a half-imported module."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from tests.child_env import child_path
from tests.launcher.launch_cli import ENV
from tests.processes import job_env

#: a module whose import is interrupted halfway: the signal comes in its body
SELF_SIGNAL = """import os, signal, time
os.kill(os.getpid(), signal.SIGINT)
time.sleep(0.3)  # the handler runs here, inside the import
DONE = True
"""
#: arms the launcher's handlers, imports SELF_SIGNAL, then waits for the stop it asked for
ARMED_IMPORT = """import sys, time
from launcher.interrupt import Interrupted, arm, defer
defer()
arm()
try:
    import self_signal
except Interrupted:
    sys.exit("raised inside the import")
try:
    time.sleep(10)
except Interrupted as stop:
    print(stop.signum, self_signal.DONE)
"""


@pytest.mark.timeout(60)
def test_a_stop_signal_inside_an_import_is_raised_once_the_import_is_done(tmp_path):
    (tmp_path / "self_signal.py").write_text(SELF_SIGNAL)
    done = subprocess.run(
        [sys.executable, "-c", ARMED_IMPORT],
        env={**ENV, "PYTHONPATH": child_path() + f":{tmp_path}"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (0, "2 True\n"), done.stderr


@pytest.mark.timeout(240)
def test_ctrl_c_at_any_moment_of_the_start_up_is_one_line(tmp_path):
    """SIGINT at 8 moments of a train job's start-up (its imports, numpy's among them, then a
    slow ``mpiexec --version``), with two busy loops slowing the imports down. Only a signal
    before Python ran any of the launcher (its own start-up: ``site``) is out of its reach."""
    slow = tmp_path / "mpiexec"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)]
    wrong = []
    try:
        for step in range(8):
            with job_env(ENV) as env:  # a hung launcher goes with its mpiexec stand-in
                launcher = subprocess.Popen(
                    [sys.executable, "-m", "launcher", "mpi", "-np", "1", "--mpiexec", str(slow),
                     "--run-dir", str(tmp_path / f"run{step}"), "--", "--epochs", "1"],
                    env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True,
                )  # fmt: skip
                try:
                    time.sleep(0.1 + 0.16 * step)
                    launcher.send_signal(signal.SIGINT)
                    _, stderr = launcher.communicate(timeout=40)
                finally:
                    launcher.kill()
                    launcher.wait()
            if "Fatal Python error: init_" in stderr:  # Python's own start-up: site, sys.stdout
                continue
            if "Traceback" in stderr and "/launcher/cli.py" not in stderr:
                continue  # before the handler: runpy finding the package, its first imports
            said = stderr.strip() == "distconv-launch mpi: interrupted before the job started"
            if launcher.returncode != 130 or not said:
                wrong.append((step, launcher.returncode, stderr[-800:]))
    finally:
        for loop in busy:
            loop.kill()
            loop.wait()
    assert not wrong, wrong
