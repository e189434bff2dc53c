"""A communication thread that keeps moving on is never reported stuck.

The main thread's waits for the thread give up after 1.5 x ``timeout``
(``test_mpi_wait_thread_stuck.py``), so that a start the watchdog cannot see is named. They
were measured from the moment the main thread began to wait, so one wait behind several live
collectives, each well inside the watchdog's ``timeout``, was cut short as "stuck": the
used-parameter flags, queued behind every bucket still on the wire, or a 16-bit bucket (two
collectives). A slow rank on a loaded machine, or a large model, failed a healthy step and
aborted the job. Now the bound is how long the thread has gone without moving on.

A communicator of one rank whose gradient collectives each take 0.8 s (under the 1 s
``timeout``) stands in for the live but slow link.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync, SingleRankComm

pytestmark = pytest.mark.timeout(60)

#: how long each of the thread's gradient collectives takes: under the timeout (1 s), while two
#: of them together are past 1.5 x the timeout
SECONDS = 0.8


class _Slow:
    """A request that completes ``SECONDS`` after its start."""

    def __init__(self) -> None:
        self.until = time.monotonic() + SECONDS

    def Test(self) -> bool:  # noqa: N802 - mpi4py's spelling
        return time.monotonic() >= self.until

    def Wait(self) -> None:  # noqa: N802
        time.sleep(max(0.0, self.until - time.monotonic()))


class SlowLink(SingleRankComm):
    """One rank whose gradient collectives (on the communication thread; not the
    used-parameter flags, a ``uint8`` sum) each take ``SECONDS``."""

    def _slow(self, send, recv, flags: bool = False):
        if threading.current_thread().name != "distconv-allreduce" or flags:
            return super().Iallreduce(send, recv)
        super().Allgather(send, recv) if send is not None else None
        return _Slow()

    def Iallreduce(self, send, recv, op=None):  # noqa: N802
        return self._slow(send, recv, np.asarray(recv).dtype == np.uint8)

    def Ialltoall(self, send, recv):  # noqa: N802
        return self._slow(send, recv)

    Iallgather = Ialltoall


@pytest.mark.parametrize(
    "grad_dtype, fired",
    [
        # 'c' (bucket 0) does not fire: the flags' wait comes behind buckets 1 and 2
        ("float32", "ab"),
        # every parameter fires: each bucket's wait covers two collectives
        ("float16", "abc"),
    ],
)
def test_a_wait_behind_live_collectives_is_not_cut_short(grad_dtype, fired):
    params = [Parameter(n, np.arange(3.0) + i) for i, n in enumerate("abc")]
    sync = MPISync(
        create_optimizer("sgd", lr=0.5),
        comm=SlowLink(),
        bucket_bytes=24,  # a bucket each, 'c' first
        grad_dtype=grad_dtype,
        overlap=True,
        timeout=1.0,
    )
    sync.setup(params, {})
    try:
        sync.start_step(1)
        for p in reversed(params):
            if p.name in fired:
                p.grad += 2.0
                sync(p)
        sync.finish_step()  # raised "waited 1.5 s ...: still inside the allreduce ..."
        for i, p in enumerate(params):
            moved = -1.0 if p.name in fired else 0.0
            np.testing.assert_array_equal(p.value, np.arange(3.0) + i + moved, err_msg=p.name)
    finally:
        sync.close()
