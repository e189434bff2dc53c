"""Under MPICH a rank's exit 75 (``distconv train``'s status for another rank's failure, a
parameter-server worker's ``PeerFailed``) is not the failing rank's status where another rank
says more: Hydra lists its processes host by host, with no times, and the rank that exited 75
came first there whenever it was listed first (the launcher exited 75 for a rank 2 that exited 1).
The local launcher reports a 75 only where no other failure comes; so does this."""

from __future__ import annotations

import pytest

from launcher.mpi_exit import mpiexec_tail, rank_status


def _exit(code: int) -> int:
    """The wait status of a process that exited ``code``."""
    return code << 8


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([_exit(75), _exit(75), _exit(1)], 1),  # the victims before the cause, by rank
        ([_exit(75), 6], -6),  # a rank's own SIGABRT beside a victim
        ([_exit(75), 9, _exit(75)], 75),  # the cleanup's SIGKILL: the victim is all there is
        ([_exit(75), 0], 75),
        ([_exit(3), _exit(75), _exit(4)], 3),  # otherwise the first in Hydra's order
    ],
)
def test_a_victims_75_gives_way_to_a_ranks_own_failure(statuses, expected):
    assert rank_status(statuses) == expected


def test_the_launcher_reports_the_rank_that_failed_not_its_victim():
    # rank 0 exited 75, rank 1 exited 1, rank 2 the cleanup's SIGKILL: Hydra exited 9
    tail = ["[0] PeerFailed: rank 1 failed", "[mpiexec@vm] Exit codes: [vm] 19200,256,9"]
    assert mpiexec_tail.ending(tail, 9) == (
        1,
        "a rank exited with code 1; mpiexec itself exited with code 9",
    )
