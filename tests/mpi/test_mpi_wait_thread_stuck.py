"""The main thread's waits for the communication thread are bounded (``timeout``).

The watchdog watches the ``Wait`` of a request, not the call that starts it, and MPICH's
non-blocking start can itself block on a broken link. The main thread waited for such a
thread without a bound: for a bucket (``CommThread.wait``), for a call (``finish``), and, after
the thread's failure, for the thread to settle (``_report``, behind the flags' start): the rank
hung for ever, the watchdog silent. Now each wait gives up after 1.5 x ``timeout`` with a
SyncError naming what the thread is still inside (and the failure before it, if any).

A communicator of one rank whose start blocks (or fails) stands in for the broken link
(:class:`~tests.mpi.common.StuckStart`): a real thread really blocked in it.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from distconv.sync.base import SyncError
from tests.mpi.common import stuck_step

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "fail, said",
    [
        (False, r"communication thread is still inside the allreduce of gradient bucket 0"),
        (
            True,
            r"allreduce of gradient bucket 0 failed on the communication thread: the link to "
            r"rank 1 is broken; .*still inside the start of the used-parameter flags",
        ),
    ],
)
def test_a_thread_stuck_in_a_start_is_a_sync_error_after_the_timeout(fail, said):
    with stuck_step(fail) as (sync, param):
        began = time.monotonic()
        with pytest.raises(SyncError, match=said) as raised:
            sync.finish_step()
        assert 1.4 < time.monotonic() - began < 10, raised.value
        assert "1.5 s" in str(raised.value)
        np.testing.assert_array_equal(param.value, np.arange(3.0))  # no update
