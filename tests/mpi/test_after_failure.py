"""A step that failed on one rank cannot be followed by another: its updates are partial (the
buckets before the failure updated, the rest not), and with the communication thread its
flags' exchange was never completed, so the ranks' parameters, and their collectives, differ."""

from __future__ import annotations

import re

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync, SingleRankComm
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script


def test_start_step_after_a_failed_finish_step_is_refused():
    sync = MPISync(create_optimizer("sgd"), comm=SingleRankComm())
    p = Parameter("w", np.ones(4))
    sync.setup([p], {})
    update = sync.optimizer.update
    sync.optimizer.update = lambda *args, **kwargs: 1 / 0
    sync.start_step(1)
    p.inc_update(sync)
    with pytest.raises(ZeroDivisionError):
        sync.finish_step()
    sync.optimizer.update = update
    with pytest.raises(SyncError, match=r"start_step after step 0 \(no finish_step, or it fail"):
        sync.start_step(1)
    sync.close()


@NEEDS_MPIEXEC[0]
@NEEDS_MPIEXEC[1]
@pytest.mark.parametrize("overlap", ["0", "1"])
@pytest.mark.parametrize("then", ["step", "sum", "first", "unpack", "unpack half"])
def test_a_rank_that_trains_on_after_a_failed_step_ends_the_job(tmp_path, overlap, then):
    """Without the refusal the ranks trained on with different weights and closed cleanly (no
    thread), or the thread's next flags' exchange went out over the one left open and MPICH
    failed an internal assertion.

    The other rank, whose finish_step succeeded, is refused too, at its next meeting (its next
    step's check, or a metrics sum), naming rank 0 and its failed step: before, its next step
    went through and waited for rank 0, which never came, until rank 0's close aborted the job
    (or the watchdog, where rank 0 did not close), so rank 1 never said why. ``first``: the
    failed step is the first, after which every rank exchanges rank 0's firing order; rank 0
    skipped that exchange, and rank 1 waited in it (a refit met it there: the watchdog).
    ``unpack``: rank 0's first bucket fails to copy back (a device copy, on that rank alone)
    after its reduction: that error was not told, so rank 1 waited as above (and rank 0 left
    the later buckets' unpacks, and without the thread their 16-bit reductions, undone).
    ``unpack half``: the same on a float16 wire, where, without the thread, rank 0's main thread
    reduces bucket 1 by hand after bucket 0's failed copy back: a rank that raised at once, even
    after telling, left rank 1 waiting in that reduction (native wires have none left there)."""
    pytest.importorskip("mpi4py")
    extra = [] if then == "step" else then.split()
    proc = run_mpi(["-n", "2", *script("run_after_failure.py"), str(tmp_path), overlap, *extra])
    assert proc.returncode != 0, proc.stdout + proc.stderr
    said = (tmp_path / "rank0.err").read_text()
    failed = 0 if then == "first" else 2
    refused = "summing" if then == "sum" else f"start_step after step {failed}"
    assert re.match(f"SyncError: .*({refused})", said), said
    assert not (tmp_path / "values0.npz").exists()
    other = tmp_path / "rank1.err"
    assert other.exists(), proc.stderr[-3000:]
    assert re.search(rf"rank 0: failed in finish_step of step {failed}\b", other.read_text())
    assert not (tmp_path / "values1.npz").exists()
