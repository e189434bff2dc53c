"""A stop signal before the supervisor's handlers (launcher.interrupt): while the launcher
imports, or waits for a question it asked another program, it ends the launch with one line
and 128 + the signal, and stops the program it waited for."""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys

import pytest

from tests.launcher.launch_cli import ENV, wait_while_running
from tests.launcher.test_supervision import wait_gone
from tests.processes import job_env

#: run before the launcher (``python -c``): the first import of ``_ctypes`` (cli's imports,
#: after defer(): launcher.child's, or the installed command's numpy's) makes the file ``ready``,
#: then waits until the file ``go`` exists (30 s at most) before it goes on: the test's signal
#: lands inside the imports however loaded the host is (it was sent once ``_ctypes`` was seen
#: mapped, and a launcher run on had sometimes finished its imports by then)
PAUSE_IN_IMPORTS = """import os, runpy, sys, time
class Pause:
    def find_spec(self, name, path=None, target=None):
        if name == "_ctypes":
            sys.meta_path.remove(self)
            open({ready!r}, "x").close()
            deadline = time.monotonic() + 30
            while not os.path.exists({go!r}) and time.monotonic() < deadline:
                time.sleep(0.001)
        return None
sys.meta_path.insert(0, Pause())
"""
#: the script pip writes for the console entry point `distconv-launch` (pyproject's)
INSTALLED = """import re, sys
from distconv.launch.cli import main
if __name__ == '__main__':
    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])
    sys.exit(main())
"""


def _start(
    argv: list[str], cwd, env: dict[str, str], installed: bool = False, paused: bool = False
) -> subprocess.Popen:
    """``python -m launcher ARGV`` run with ``env`` (a :func:`tests.processes.job_env`'s: a
    launcher that hangs goes with all it started), or the installed ``distconv-launch ARGV``;
    ``paused``: with :data:`PAUSE_IN_IMPORTS` (its files ``ready`` and ``go`` in ``cwd``)."""
    command = [sys.executable, "-m", "launcher"]
    if installed:
        if importlib.util.find_spec("distconv.launch") is None:
            pytest.skip("distconv is not installed: no distconv.launch for distconv-launch")
        script = cwd / "bin" / "distconv-launch"
        script.parent.mkdir()
        script.write_text(INSTALLED)
        command = [sys.executable, str(script)]
    if paused:  # the same program, run by runpy after the pause is set
        pause = PAUSE_IN_IMPORTS.format(ready=str(cwd / "ready"), go=str(cwd / "go"))
        run = (
            f"runpy.run_path({str(script)!r}, run_name='__main__')"
            if installed
            else ("runpy.run_module('launcher', run_name='__main__', alter_sys=True)")
        )
        command = [sys.executable, "-c", pause + run]
    return subprocess.Popen(
        [*command, *argv],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    ("signum", "said"),
    [
        (signal.SIGINT, "interrupted before the job started"),
        (signal.SIGTERM, "stopped by SIGTERM before the job started"),
        (signal.SIGHUP, "stopped by SIGHUP before the job started"),
    ],
)
@pytest.mark.parametrize("installed", [False, True], ids=["python-m", "distconv-launch"])
def test_a_stop_signal_while_the_launcher_imports_is_one_line(tmp_path, signum, said, installed):
    """Ctrl-C printed a traceback from an import; SIGTERM and SIGHUP ended it without a word.
    The installed command imports the distconv package before its own: numpy came with it."""
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", str(tmp_path / "run")]
    with job_env(ENV) as env:
        launcher = _start([*argv, "--", "true"], tmp_path, env, installed, paused=True)
        try:
            ready = (tmp_path / "ready").exists  # 60 s: a loaded host took over 30 to get there
            wait_while_running(ready, launcher, "cli's imports", limit=60)
            launcher.send_signal(signum)
            (tmp_path / "go").touch()  # after the signal: the imports go on once it has landed
            _, stderr = launcher.communicate(timeout=60)
        finally:
            launcher.kill()
            launcher.wait()
    assert "Traceback" not in stderr
    assert stderr.strip() == f"distconv-launch local: {said}"
    assert launcher.returncode == 128 + signum
    assert not (tmp_path / "run").exists()  # the job never started


@pytest.mark.timeout(90)
@pytest.mark.parametrize("log_format", ["text", "json"])
def test_sigterm_while_the_launcher_asks_mpiexec_stops_it_and_says_so(tmp_path, log_format):
    """SIGTERM during `mpiexec --version`: the launcher died silently (-15), and left it. Under
    ``-- --log-format json`` its one line is a stop the user asked for, levelled as the
    launcher's other stop lines (``info``), not an ``error`` a collector would count as the
    job's failure."""
    slow = tmp_path / "mpiexec"
    pid_file = tmp_path / "mpiexec.pid"
    slow.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 60\n")
    slow.chmod(0o755)
    argv = ["mpi", "-np", "1", "--mpiexec", str(slow), "--run-dir", str(tmp_path / "run")]
    with job_env(ENV) as env:  # the stand-in's sleep goes too, whatever the launcher did
        launcher = _start([*argv, "--", "--epochs", "1", "--log-format", log_format], tmp_path, env)
        try:
            written = lambda: pid_file.exists() and pid_file.read_text().strip()  # noqa: E731
            wait_while_running(written, launcher, "mpiexec")
            launcher.send_signal(signal.SIGTERM)
            _, stderr = launcher.communicate(timeout=60)
        finally:
            launcher.kill()
            launcher.wait()
        said = "distconv-launch mpi: stopped by SIGTERM before the job started"
        if log_format == "text":
            assert stderr.strip() == said
        else:
            last = json.loads(stderr.strip().splitlines()[-1])  # the last line, whole JSON
            assert last["message"] == said, last
            assert (last["level"], last["role"]) == ("info", "launcher"), last
        assert launcher.returncode == 143
        # killed, not left running (a zombie until init reaps it: subprocess.run does not wait
        # for the child it kills on an interrupt, and the launcher has exited); checked before
        # the block's end kills what is left of the job
        assert wait_gone([int(pid_file.read_text())]) == []
