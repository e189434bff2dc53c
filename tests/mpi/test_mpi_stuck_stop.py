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


def test_a_setup_made_again_after_the_stop_gave_up_is_refused_too():
    """The stop that named the thread raised; the thread, still inside the start, was kept
    (``_stop_thread``). A setup made again (a caller that caught the SyncError and fitted
    again) stopped it again, which returned at once ("again: nothing to do"): the setup went
    on to call MPI on the main thread beside the thread still in MPI, and made a new thread
    over it. It is refused alike, at once: the thread has not moved on since."""
    with stuck_step(fail=False) as (sync, param):
        sync.abandon_step()
        with pytest.raises(SyncError, match=SAID):
            sync.setup([param], {})
        began = time.monotonic()
        with pytest.raises(SyncError, match=SAID):
            sync.setup([param], {})  # was: went on, a new thread over the stuck one
        assert time.monotonic() - began < 0.5
        np.testing.assert_array_equal(param.value, np.arange(3.0))
