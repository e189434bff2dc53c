"""UsedParams.drain, as close() calls it (clean_leave.leave): flags left pending (a second Ctrl-C
in finish_step as they were waited for or read) are completed, as MPI must see them, but not
read. What they say (another rank's failed or abandoned step, this rank's failed pack) was the
failed step's to raise; read at close, a refusal was raised there and the job aborted. (MPISync
does not reach it today: its close aborts after any failed step first, the step still open.)
Stand-ins: one rank, no MPI."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.sync.mpi.clean_leave import leave
from distconv.sync.mpi.step_check import StepCheck
from distconv.sync.mpi.thread import CommThread
from distconv.sync.mpi.used import ABANDONED, FAILED, UsedParams
from tests.mpi.common import RecordingComm

pytestmark = pytest.mark.timeout(30)


class OthersSay(RecordingComm):
    """The flags OR-ed over the ranks say ``flag`` on every parameter: another rank's."""

    def __init__(self, flag: int) -> None:
        super().__init__()
        self.flag = flag

    def Iallreduce(self, send, recv, op=None):  # noqa: N802 - mpi4py's spelling
        request = super().Iallreduce(send, recv, op)
        if recv.dtype == np.uint8:
            recv.fill(max(self.flag, int(recv.max())))
        return request


def reduce(bucket, wait, piece) -> None:  # no bucket is queued here
    raise AssertionError("no reduction expected")


@pytest.mark.parametrize("threaded", [False, True], ids=["main", "thread"])
@pytest.mark.parametrize("said", ["another's failed", "another's abandoned", "own failed pack"])
def test_close_completes_flags_left_pending_without_raising_what_they_say(threaded, said):
    comm = OthersSay({"another's failed": FAILED, "another's abandoned": ABANDONED}.get(said, 0))
    check, used = StepCheck(comm), UsedParams(comm, 2, None)
    thread = CommThread(reduce) if threaded else None
    check.post(3, {}, 0, 4)
    if said == "own failed pack":
        used.fail(RuntimeError("a pack failed"), 2)  # raised at the step
    used.post(thread)  # then a second Ctrl-C in finish_step: the flags stay pending
    aborted: list[BaseException] = []
    try:
        leave(check, used, thread, 4, aborted.append)
    finally:
        if thread is not None:
            thread.stop()
    assert (aborted, used.pending) == ([], False)
    assert comm.log == ["Iallgather", "used flags", "check complete", "Iallgather closing",
                        "check complete"]  # fmt: skip
