"""A launched job whose worker ends on an error of the job itself (a DataError) that carries a
note (PEP 678: ``add_note``): the note's lines come before the error's line, and the launcher,
which reads the error from the worker's last line (``NAME: error: ...``; under ``mpi`` the
rank's abort line, led by ``rank N: note: ...``), still names it in its headline and restarts
none. Real ``distconv-launch local`` and ``mpi`` running a real script through ``run_main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch
from tests.launcher.real_children import mpiexec_or_skip

#: the note on the script's DataError, its second line indented; and how each line is said
NOTE = "drop row 5, or clean the file\n  the rows: 5"
NOTE_SAID = ["drop row 5, or clean the file", "the rows: 5"]
ERROR = "DataError: the training set's 'x' holds NaN in 1 row(s): row 5"

#: a script whose rank 0 (under MPI: rank 1, after its sync's setup) raises the noted DataError
SCRIPT = f"""\
import sys

import numpy as np

import distconv.distributed as dist
from distconv.data import DataError
from distconv.notes import add_note


def fail():
    error = DataError("the training set's 'x' holds NaN in 1 row(s): row 5")
    add_note(error, {NOTE!r})
    raise error


def main():
    dist.init("sgd", lr=0.01)
    if sys.argv[1] != "mpi":
        fail()
    from distconv.optim import create_optimizer
    from distconv.parameter import Parameter
    from distconv.sync.mpi import MPISync

    sync = MPISync(create_optimizer("sgd"))
    sync.setup([Parameter("w", np.zeros(3))], {{}})
    try:
        if sync.rank == 0:
            sync.comm.Barrier()  # until rank 1's abort ends the job
            return
        fail()
    finally:
        sync.close()


sys.exit(dist.run_main(main))
"""

NOT_RESTARTED = "not restarting (--max-restarts 1): the job's own DataError"


def _launched(tmp_path: Path, *own: str) -> tuple[list[str], dict]:
    """The launcher's lines (stderr, then stdout) and its report after ``own`` (its command
    and flags, ``--max-restarts 1``) ran the script, which must have failed with status 1."""
    script = tmp_path / "noted.py"
    script.write_text(SCRIPT)
    run = tmp_path / "run"
    how = "mpi" if own[0] == "mpi" else "local"
    argv = [*own, "--max-restarts", "1", "--run-dir", str(run), "--", str(script), how]
    done = launch(*argv, cwd=tmp_path)
    said = done.stderr + done.stdout
    assert done.returncode == 1, said[-3000:]
    return said.splitlines(), json.loads((run / "failure.json").read_text())


@pytest.mark.timeout(60)
def test_a_local_workers_noted_job_error_is_named_and_not_restarted(tmp_path):
    lines, report = _launched(tmp_path, "local", "--workers", "1", "--servers", "0")
    ending = [*(f"noted.py: note: {line}" for line in NOTE_SAID), f"noted.py: error: {ERROR}"]
    assert report["tail"][-3:] == ending, report
    assert report["then"].startswith(NOT_RESTARTED), report
    assert report["restart"] == 0, report
    headline = next(line for line in lines if "worker 0 failed with exit code 1" in line)
    assert NOT_RESTARTED in headline, lines


@pytest.mark.timeout(90)
def test_an_mpi_ranks_noted_job_error_is_named_and_not_restarted(tmp_path):
    mpiexec_or_skip()
    lines, report = _launched(tmp_path, "mpi", "-np", "2")
    abort = f"[1] rank 1: {ERROR}; aborting the MPI job"
    at = lines.index(abort)
    assert lines[at - 2 : at] == [f"[1] rank 1: note: {line}" for line in NOTE_SAID], lines
    assert report["cause"] == f"rank 1 ended the job: {ERROR}", report
    assert report["then"].startswith(NOT_RESTARTED), report
