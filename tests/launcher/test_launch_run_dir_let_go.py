"""``distconv-launch`` called as a function (:func:`launcher.main`, in a process that goes on)
lets its run directory go however the launch ends: a launch refused or stopped after it took
the run directory (its keys refused, a stop signal while ``distconv keys`` runs) kept the lock,
and every later launch there from the same process was refused as "in use" by itself."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.launcher.launch_cli import ENV
from tests.processes import job_env

#: three launches into one run directory from one process, each one's status printed: keys
#: for one worker made; then two workers, refused as those keys do not fit ("keys") or, the
#: keys moved away, stopped by a SIGTERM sent from inside its ``distconv keys`` Popen ("stop"),
#: or stopped by one handled as it has just taken the run directory ("claimed", and as an
#: ``mpi`` launch with ``true`` for its mpiexec, "claimed-mpi"); then a job
#: without servers (no keys), which needs only the run directory
SCRIPT = """
import os, shutil, signal, subprocess, sys
from launcher import cli
from launcher.supervisor import Supervisor

run, how = sys.argv[1], sys.argv[2]
servers = ["--servers", "1", "--run-dir", run, "--", "true"]
print(cli.main(["local", "--workers", "1", *servers]), flush=True)
started = subprocess.Popen._execute_child

def start_then_signal(self, *args, **kwargs):
    started(self, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGTERM)

claim = Supervisor.claim

def claim_then_signal(self):  # handled as claim() returns, before anything after it
    claim(self)
    os.kill(os.getpid(), signal.SIGTERM)

if how == "stop":
    os.rename(os.path.join(run, "keys"), os.path.join(run, "old-keys"))
    subprocess.Popen._execute_child = start_then_signal
middle = ["local", "--workers", "2", *servers]
if how.startswith("claimed"):
    Supervisor.claim = claim_then_signal
if how == "claimed-mpi":
    mpi = ["mpi", "-np", "1", "--mpiexec", shutil.which("true"), "--mpi-flavor", "openmpi"]
    middle = [*mpi, "--run-dir", run, "--", "true"]
print(cli.main(middle), flush=True)
subprocess.Popen._execute_child, Supervisor.claim = started, claim
print(cli.main(["local", "--workers", "1", "--run-dir", run, "--", "true"]), flush=True)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("how", "status"), [("keys", 1), ("stop", 143), ("claimed", 143), ("claimed-mpi", 143)]
)
def test_a_launch_refused_or_stopped_before_its_job_lets_the_run_dir_go(tmp_path, how, status):
    with job_env(ENV) as env:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path / "run"), how],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert done.stdout.split() == ["0", str(status), "0"], done
    assert "in use" not in done.stderr, done.stderr
