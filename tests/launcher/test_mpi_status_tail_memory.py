"""Only mpiexec's child keeps :data:`launcher.mpi_exit.READ_LINES` of its output for Hydra's status
block (a line per host); every other child keeps the :data:`launcher.failure.TAIL_LINES` its
report shows. All of them kept 1,024: a local job of 64 workers, each line up to a traceback's or
a progress bar's length, held 64 x 1,024 lines in the launcher for no reader."""

from __future__ import annotations

import pytest

from launcher.child import ChildSpec
from launcher.failure import TAIL_LINES
from launcher.mpi_exit import READ_LINES, mpiexec_tail
from tests.launcher.real_children import run_to_exit

#: prints more lines than a worker keeps, fewer than mpiexec does
SCRIPT = "i=0; while [ $i -lt 100 ]; do echo line $i; i=$((i+1)); done; exit 3"


@pytest.mark.timeout(30)
def test_a_worker_keeps_only_the_lines_its_report_shows(tmp_path):
    child = run_to_exit(tmp_path, ChildSpec("worker", 0, ["sh", "-c", SCRIPT]))
    assert child.tail.maxlen == TAIL_LINES
    assert list(child.tail) == [f"line {i}" for i in range(100 - TAIL_LINES, 100)]
    assert child.failure(restart=0).tail == list(child.tail)


@pytest.mark.timeout(30)
def test_mpiexec_keeps_the_lines_its_status_block_needs(tmp_path):
    spec = ChildSpec("mpiexec", 0, ["sh", "-c", SCRIPT], prefix="", reader=mpiexec_tail)
    child = run_to_exit(tmp_path, spec)
    assert child.tail.maxlen == READ_LINES
    assert len(child.tail) == 100
    assert child.failure(restart=0).tail == [f"line {i}" for i in range(100 - TAIL_LINES, 100)]
