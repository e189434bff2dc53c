"""BLAS threads per rank of ``distconv-launch mpi`` are this host's cores over the most ranks
any one host receives: they were over the ranks per host entry, so a host on two hostfile
lines (one host to MPI) got twice the threads of the same host written once, and uneven
slots were judged as even."""

from __future__ import annotations

import re

import pytest

from launcher.commands import threads_per_process
from launcher.mpi import Host, most_ranks_on_a_host
from tests.launcher.launch_cli import launch


@pytest.mark.parametrize(
    "np, hosts, most",
    [
        (2, [("localhost", 1), ("localhost", 1)], 2),  # one host, two lines
        (3, [("a", 1), ("b", 1), ("A.", 1)], 2),  # the same name, as DNS reads it
        (2, [("a", 2), ("b", 2)], 2),  # by slots: both on a
        (3, [("a", 2), ("b", 2)], 2),
        (4, [("a", 3), ("b", 1)], 3),
        (7, [("a", 2), ("b", 1)], 5),  # oversubscribed: 2+2+1 rounds on a, 1+1 on b
        (6, [("a", 1), ("b", 1)], 3),
        (5, [], 5),  # mpiexec's own hosts: this one
    ],
)
def test_the_most_ranks_a_host_receives(np, hosts, most):
    assert most_ranks_on_a_host(np, [Host(name, slots) for name, slots in hosts]) == most


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "hostfile, ranks",
    [
        ("localhost:1\nlocalhost:1\n", 2),  # the two lines are one host: -H localhost:2
        ("node-a slots=2\nnode-b slots=2\n", 2),  # by slots, both ranks go to node-a
        ("node-a slots=1\nnode-b slots=1\n", 1),
    ],
)
def test_a_dry_runs_blas_threads_count_the_ranks_a_host_receives(tmp_path, hostfile, ranks):
    (tmp_path / "hosts").write_text(hostfile)
    done = launch("mpi", "-np", "2", "--hostfile", "hosts", "--mpi-flavor", "mpich",
                  "--dry-run", "--", "--epochs", "1", cwd=tmp_path, timeout=50)  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = re.findall(r"\bOMP_NUM_THREADS=(\d+) ", done.stdout)
    assert said == [str(threads_per_process(ranks))], done.stdout
