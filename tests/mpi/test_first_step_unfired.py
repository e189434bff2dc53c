"""A first step in which rank 0 fired no gradient (a batch whose loss reaches no parameter on
that rank) and whose ``finish_step`` succeeded: its firing order is the empty one, recorded on
every rank (and gathered again at the next step), and the step is over. Before, "over" was read
as "an order recorded" (a non-empty tuple): the sync took the step for one that failed, refused
the next ``start_step`` and every meeting, and its close aborted the job."""

from __future__ import annotations

from distconv.sync.mpi import SingleRankComm
from tests.mpi.common import bucket_params, bucket_sync, fire


def test_a_first_step_that_fired_nothing_is_over_and_the_next_records_the_order():
    sync = bucket_sync(comm=SingleRankComm())
    params = bucket_params()
    sync.setup(params, {})
    sync.start_step(1)
    sync.finish_step()  # nothing fired: nothing to update, the step over all the same
    assert sync._open is None
    sync.barrier()  # a meeting between steps
    sync.start_step(1)
    fire(sync, params[0], 1.0)
    sync.finish_step()
    assert sync._open is None and sync._recorded == (params[0].name,)
    sync.close()
