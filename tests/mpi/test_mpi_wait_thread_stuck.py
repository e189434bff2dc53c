"""The main thread's waits for the communication thread are bounded (``timeout``).

The watchdog watches the ``Wait`` of a request, not the call that starts it, and MPICH's
non-blocking start can itself block on a broken link. The main thread waited for such a
thread without a bound: for a bucket (``CommThread.wait``), for a call (``finish``), and, after
the thread's failure, for the thread to settle (``_report``, behind the flags' start): the rank
hung for ever, the watchdog silent. Now each wait gives up after 1.5 x ``timeout`` with a
SyncError naming what the thread is still inside (and the failure before it, if any).

A communicator of one rank whose start blocks (or fails) stands in for the broken link: a real
thread really blocked in it.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync, SingleRankComm

pytestmark = pytest.mark.timeout(60)


class StuckStart(SingleRankComm):
    """One rank whose gradient allreduce's start blocks until released; or (``fail``) fails
    at once, and the used-parameter flags' start (a ``uint8`` buffer) blocks instead."""

    def __init__(self, fail: bool) -> None:
        super().__init__()
        self.fail, self.release = fail, threading.Event()

    def Iallreduce(self, send, recv, op=None):  # noqa: N802 - mpi4py's spelling
        flags = np.asarray(recv).dtype == np.uint8
        if self.fail and not flags:
            raise RuntimeError("the link to rank 1 is broken")
        if flags == self.fail:
            self.release.wait(30)  # the broken link: the start never returns by itself
        return super().Iallreduce(send, recv, op)


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
    comm = StuckStart(fail)
    sync = MPISync(create_optimizer("sgd"), comm=comm, overlap=True, timeout=1.0)
    param = Parameter("w", np.arange(3.0))
    sync.setup([param], {})
    try:
        sync.start_step(1)
        param.grad += 1.0
        sync(param)
        began = time.monotonic()
        with pytest.raises(SyncError, match=said) as raised:
            sync.finish_step()
        assert 1.4 < time.monotonic() - began < 10, raised.value
        assert "1.5 s" in str(raised.value)
        np.testing.assert_array_equal(param.value, np.arange(3.0))  # no update
    finally:
        comm.release.set()
        try:
            sync.close()
        except SyncError:
            pass
