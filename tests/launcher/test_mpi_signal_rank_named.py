"""A rank killed by a signal is named where every rank ran on one host.

``distconv-launch mpi -np 2`` with rank 1 SIGKILLed said "mpiexec 0 failed with signal SIGKILL:
a rank died of signal 9 (SIGKILL), as mpiexec says". Hydra's ``-print-all-exitcodes`` lists a
host's statuses in rank order, so where they are one host's, all the job's ranks, the index is
the rank; across hosts (ranks placed by slots) or where two processes died of the signal, it is
not, and "a rank" stays."""

from __future__ import annotations

import pytest

from launcher.mpi_exit import mpiexec_reader, mpiexec_tail
from tests.launcher.test_launch_mpi_signal import HYDRA_LINE, _run

KILLED = "died of signal 9 (SIGKILL), as mpiexec says"


def _tail(*hosts: str) -> list[str]:
    first, *more = hosts
    return ["[0] step 3", f"[mpiexec@vm] Exit codes: {first}", *more, HYDRA_LINE]


@pytest.mark.parametrize(
    ("hosts", "ranks", "code", "cause"),
    [
        (["[vm] 0,9"], 2, 9, f"rank 1 {KILLED}"),  # rank 1 SIGKILLed; rank 0 let go
        (["[vm] 0,0,6"], 3, 6, "rank 2 died of signal 6 (SIGABRT), as mpiexec says"),
        (["[vm] 9,6,9"], 3, 15, "rank 1 died of signal 6 (SIGABRT), as mpiexec says"),
        (["[vm] 9,9"], 2, 9, f"a rank {KILLED}"),  # which SIGKILL came first is not said
        (["[vm] 0,9"], 3, 9, f"a rank {KILLED}"),  # not the job's every rank: a block cut short
        (["[a] 0", "[b] 9"], 2, 9, f"a rank {KILLED}"),  # across hosts: placed by slots
    ],
    ids=["sigkill", "sigabrt", "beside-cleanup", "two-killed", "fewer", "two-hosts"],
)
def test_the_rank_is_named_where_the_statuses_are_one_hosts_every_rank(hosts, ranks, code, cause):
    itself = f"mpiexec itself exited with code {code}"
    status, said = mpiexec_reader(ranks).read(_tail(*hosts), code)
    assert said in (cause, f"{cause}; {itself}"), said
    assert mpiexec_tail.cause(_tail(*hosts)).startswith("a rank ")  # the job's ranks unknown


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_a_rank_killed_on_this_host_is_named(tmp_path):
    done, report = _run(tmp_path, "kill", 9)
    assert done.returncode == 137, done.stderr
    headline = [line for line in done.stderr.splitlines() if "(under mpiexec 0)" in line]
    assert len(headline) == 1 and f"rank 1 {KILLED}" in headline[0], done.stderr
    assert report["cause"].startswith(f"rank 1 {KILLED}"), report
