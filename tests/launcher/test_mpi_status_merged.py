"""Hydra's merged status, every run: rank 1 exits 3 and the other ranks die of SIGKILL, so
Hydra ORs ``768 | 9`` and exits 9, and the launcher must exit with rank 1's 3.

The end-to-end test in ``test_mpi_rank_status.py`` waits for Hydra's cleanup to merge its
SIGKILL (about one run in four here; where it never does, it skips). Here Hydra runs with
``-disable-auto-cleanup`` (an ``--mpiexec`` wrapper), and ranks 0 and 2 SIGKILL themselves
once rank 1 has exited: the statuses are ``9,768,9`` each run, the case is exercised on any
machine, and a launcher that reports mpiexec's merged 9 fails here, never skips."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch
from tests.launcher.real_children import mpiexec_or_skip

#: rank 1 exits 3; the others, after it, die as Hydra's cleanup would have killed them
RANK_1_EXITS_3_OTHERS_KILLED = """import os, signal, time
from mpi4py import MPI
MPI.COMM_WORLD.Barrier()
if MPI.COMM_WORLD.Get_rank() == 1:
    os._exit(3)
time.sleep(0.5)
os.kill(os.getpid(), signal.SIGKILL)
"""
#: Hydra without its cleanup (each rank's status is its own), run with ``{flags}`` too
NO_CLEANUP = '#!/bin/sh\nexec "{mpiexec}" -disable-auto-cleanup {flags} "$@"\n'


def hydra_without_cleanup(tmp_path: Path, *flags: str) -> Path:
    """An ``--mpiexec`` for the launcher: MPICH's Hydra with ``-disable-auto-cleanup`` and
    ``flags``; skips the test where mpiexec is not Hydra, or mpi4py is missing."""
    mpiexec = mpiexec_or_skip()
    version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30)
    if "HYDRA" not in version.stdout:
        pytest.skip("mpiexec is not MPICH's Hydra")
    wrapper = tmp_path / "mpiexec-no-cleanup"
    wrapper.write_text(NO_CLEANUP.format(mpiexec=mpiexec, flags=" ".join(flags)))
    wrapper.chmod(0o755)
    return wrapper


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_the_launcher_exits_with_the_ranks_code_where_hydra_merged_a_sigkill(tmp_path):
    wrapper = hydra_without_cleanup(tmp_path)
    script = tmp_path / "exit3.py"
    script.write_text(RANK_1_EXITS_3_OTHERS_KILLED)
    run = tmp_path / "run"
    flags = ["--mpiexec", str(wrapper), "--mpi-flavor", "mpich", "--threads", "1", "--run-dir"]
    done = launch("mpi", "-np", "3", *flags, str(run), "--", str(script), cwd=tmp_path, timeout=60)
    log = (run / "logs" / "mpiexec-0.log").read_text()
    assert "] 9,768,9" in log, log  # rank 1's exit(3) between two SIGKILLs: Hydra exits 9
    report = json.loads((run / "failure.json").read_text())
    assert done.returncode == 3, done.stderr
    assert (report["exit_code"], report["signal"], report["signal_number"]) == (3, None, None)
    assert report["cause"] == "a rank exited with code 3; mpiexec itself exited with code 9"
    assert "mpiexec 0 failed with exit code 3: a rank exited with code 3" in done.stderr
