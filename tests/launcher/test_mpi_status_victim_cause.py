"""Under MPICH, where a rank's 75 is the status the launcher reports (no other rank said more:
:func:`launcher.mpi_exit.rank_status`), the cause says what a 75 is, and names a SIGKILL beside
it, which is the rank that failed or Hydra's cleanup (its statuses have no times). Before, the
report said only "a rank exited with code 75; mpiexec itself exited with code 9", the SIGKILL
left out; and where Hydra itself exited 75 it said nothing: ``local`` says "stopped because
another rank failed" for the same status."""

from __future__ import annotations

import pytest

from launcher.mpi_exit import mpiexec_tail

VICTIM = (
    "a rank exited with code 75 (stopped because another rank failed: the ranks' lines name it)"
)
KILLED = "a rank died of signal 9 (SIGKILL): the one that failed, or Hydra's cleanup"


@pytest.mark.parametrize(
    ("codes", "mpiexec", "cause"),
    [
        # rank 1 killed (stuck, then Hydra's cleanup; or the OOM killer before it): Hydra ORs 9
        ("[vm] 19200,9", 9, f"{VICTIM}; {KILLED}; mpiexec itself exited with code 9"),
        ("[vm] 19200,0", 75, f"{VICTIM}; mpiexec itself exited with code 75"),
    ],
)
def test_a_reported_75_says_what_it_is(codes, mpiexec, cause):
    tail = ["[0] PeerFailed: rank 1 ...", f"[mpiexec@vm] Exit codes: {codes}"]
    assert mpiexec_tail.read(tail, mpiexec) == (75, cause)
