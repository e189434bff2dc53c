"""A ``net.zero_grad()`` between backward and ``finish_step`` in a loop of one's own is refused
at once, naming the parameter and the way on; the close that follows raises that refusal as it
is. It raised its words of a write in the window instead ("the gradient of 'hidden.weight' was
written after it fired ... such a write was lost, applied, or raced the reduction"), and under
MPI that was the rank's one line, though nothing was written.

Run as a user runs ``examples/own_loop.py``: a copy that zeroes the gradients before
``finish_step`` of step 2, as 2 ranks of a real ``mpiexec`` and as two workers on a real shard
(127.0.0.1, port 0). (In one process, every transport: ``tests/test_zero_grad_held.py``.)
"""

from __future__ import annotations

import re

import pytest

from tests.mpi.common import NEEDS_MPIEXEC
from tests.sync.test_collective_in_open_step import (
    failed_mpi_ranks,
    own_loop_copy,
    workers_on_a_shard,
)

pytestmark = pytest.mark.timeout(180)

#: the mistake: the gradients zeroed before the step's finish_step, as a PyTorch loop may
ZEROED = "        if step == 2:\n            net.zero_grad()\n"
#: the refusal's words (not imported from the code it tests), for the sync's class
REFUSED = (
    "zero_grad of 'hidden.weight': its gradient is read-only, fired to {0} in a step that is "
    "unfinished, and the sync's until that step ends (on the wire, or applied): call "
    "{0}.finish_step() first, or {0}.abandon_step() where the step raised"
)
#: what the close said of it before
WRITTEN = "was written after it fired"


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
def test_under_mpi_the_ranks_line_is_the_refusal(tmp_path):
    done = failed_mpi_ranks(tmp_path, ZEROED)
    said = re.escape(f"SyncError: {REFUSED.format('MPISync')}; aborting the MPI job")
    assert re.search(rf"^rank [01]: {said}$", done.stderr, re.M), done.stderr
    assert WRITTEN not in done.stderr, done.stderr
    assert "epoch 1:" not in done.stdout


def test_on_a_shard_each_workers_last_line_is_the_refusal(tmp_path):
    for done in workers_on_a_shard(own_loop_copy(tmp_path, ZEROED), tmp_path):
        assert done.returncode == 1, done.stderr
        last = done.stderr.splitlines()[-1]
        assert last.endswith(f"SyncError: {REFUSED.format('PServerSync')}"), done.stderr
        assert WRITTEN not in done.stderr, done.stderr
