"""Stopping a communication thread stuck in a start gives up after 1.5 x ``timeout``, not a
fixed time (``CommThread.stop``, as the main thread's other waits for the thread).

The fast half of what ``test_mpi_abandon_late.py`` shows: there a rank that abandons the step
late but inside the ``timeout`` is waited for (the stop's bound grows with ``timeout``); here a
thread that never moves on again is named after 1.5 x ``timeout`` (the bound shrinks with it).
No fixed bound does both. The stop waited a fixed 30 s before, whatever the ``timeout``.

A communicator of one rank whose gradient start blocks stands in for the broken link
(:class:`~tests.mpi.common.StuckStart`): a real thread really blocked in it.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from distconv.sync.base import SyncError
from tests.mpi.common import stuck_step

pytestmark = pytest.mark.timeout(60)

SAID = (
    r"waited for the communication thread to stop: the communication thread is still inside "
    r"the allreduce of gradient bucket 0, 1.5 s without moving on"
)


def test_a_setup_after_an_abandoned_step_names_a_thread_stuck_in_a_start():
    with stuck_step(fail=False) as (sync, param):  # its bucket's start blocks on the thread
        sync.abandon_step()
        began = time.monotonic()
        with pytest.raises(SyncError, match=SAID) as raised:
            sync.setup([param], {})  # stops the thread: was 30 s, "did not stop within 30 s"
        assert 1.4 < time.monotonic() - began < 10, raised.value
        np.testing.assert_array_equal(param.value, np.arange(3.0))
