"""BLAS threads per rank of ``distconv-launch mpi`` are this host's cores over the most ranks
any one host receives: they were over the ranks per host entry, so a host on two hostfile
lines (one host to MPI) got twice the threads of the same host written once, and uneven
slots were judged as even."""

from __future__ import annotations

import re
import subprocess
from collections import Counter

import pytest

from launcher.commands import threads_per_process
from launcher.mpi import Host, most_ranks_on_a_host
from tests.launcher.launch_cli import ENV, launch
from tests.launcher.real_children import mpiexec_or_skip
from tests.processes import kill_job, run_job


def _hosts(spec: str) -> list[Host]:
    """``a:1,b:3`` as hosts."""
    return [Host(name, int(slots)) for name, slots in (w.split(":") for w in spec.split(","))]


@pytest.mark.parametrize(
    "np, hosts, most",
    [
        (2, "localhost:1,localhost:1", 2),  # one host, two lines
        (3, "a:1,b:1,A.:1", 2),  # the same name, as DNS reads it
        (2, "a:2,b:2", 2),  # by slots: both on a
        (3, "a:2,b:2", 2),
        (4, "a:3,b:1", 3),
        (7, "a:2,b:1", 5),  # oversubscribed: 2+2+1 rounds on a, 1+1 on b
        (6, "a:1,b:1", 3),
        (4, "a:1,b:3,a:1", 3),  # a's second line is an entry of its own, after b's 3
        (2, "a:1,b:1,a:1", 1),
        (5, "a:1,b:2,a:1", 3),  # the second round starts at a's first line
    ],
)
def test_the_most_ranks_a_host_receives_from_hydra(np, hosts, most):
    assert most_ranks_on_a_host(np, _hosts(hosts), "mpich") == most
    assert most_ranks_on_a_host(np, [], "mpich") == np  # mpiexec's own hosts: this one


@pytest.mark.parametrize(
    "np, hosts, most",
    [  # as Open MPI 5.0.11's mpirun --display map placed them
        (2, "a:1,b:1,a:1", 2),  # a's two lines are one host of 2 slots
        (5, "a:1,b:2,a:1", 3),
        (2, "a:2,b:2", 2),
        (4, "a:1,b:1,c:1", 2),  # past the slots, spread over the hosts, the first ones first
        (7, "a:2,b:1", 4),
        (7, "a:1,b:3", 4),
        (7, "a:3,b:1,c:1", 4),
        (9, "a:1,b:5", 6),
        (9, "a:4,b:1", 6),
    ],
)
def test_the_most_ranks_a_host_receives_from_open_mpi(np, hosts, most):
    assert most_ranks_on_a_host(np, _hosts(hosts), "openmpi") == most
    assert most_ranks_on_a_host(np, [], "openmpi") == np


#: ssh's stand-in for Hydra: drops its options and the host, and runs the command here
HERE_SSH = """#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -o) shift 2;; -*) shift;; *) break;; esac; done
shift
exec sh -c "$*"
"""


#: each rank: a line, then a moment before it ends (a bare echo ended before Hydra's proxies had
#: reported in, and under load Hydra failed its own `assert (!closed)` now and then)
RANK = ("sh", "-c", "echo; sleep 0.2")


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_hydra_places_the_ranks_so(tmp_path):
    """Hydra's own placement, each rank's output prefixed with its entry's host: its proxies
    start through an ssh stand-in, on hosts that are none of this one's names."""
    mpiexec = mpiexec_or_skip()
    fake = tmp_path / "ssh"
    fake.write_text(HERE_SSH)
    fake.chmod(0o755)
    env = {**ENV, "HYDRA_LAUNCHER_EXEC": str(fake), "HYDRA_LAUNCHER": "ssh"}
    for np, spec in ((4, "a:1,b:3,a:1"), (2, "a:1,b:1,a:1"), (5, "a:1,b:2,a:1"), (7, "a:2,b:1")):
        hosts = spec.replace("a", "10.255.255.1").replace("b", "10.255.255.2")
        done = run_job(
            [mpiexec, "-n", str(np), "-hosts", hosts, "-prepend-pattern", "%h ", *RANK],
            env=env, timeout=30, cwd=tmp_path, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            assert done.returncode == 0, done.stderr
        finally:  # the proxies start in sessions of their own (the ssh stand-in's): one a
            kill_job(done.env)  # failed run left behind would outlive the test
        placed = Counter(line.split()[0] for line in done.stdout.splitlines())
        assert sum(placed.values()) == np, done.stdout
        assert max(placed.values()) == most_ranks_on_a_host(np, _hosts(hosts)), (spec, placed)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "hostfile, flavor, ranks",
    [
        ("localhost:1\nlocalhost:1\n", "mpich", 2),  # the two lines are one host: -H localhost:2
        ("node-a slots=2\nnode-b slots=2\n", "mpich", 2),  # by slots, both go to node-a
        ("node-a slots=1\nnode-b slots=1\n", "mpich", 1),
        ("node-a:1\nnode-b:1\nnode-a:1\n", "mpich", 1),  # Hydra: a, then b
        ("node-a:1\nnode-b:1\nnode-a:1\n", "openmpi", 2),  # Open MPI: node-a's 2 slots
    ],
)
def test_a_dry_runs_blas_threads_count_the_ranks_a_host_receives(tmp_path, hostfile, flavor, ranks):
    (tmp_path / "hosts").write_text(hostfile)
    done = launch("mpi", "-np", "2", "--hostfile", "hosts", "--mpi-flavor", flavor,
                  "--dry-run", "--", "--epochs", "1", cwd=tmp_path, timeout=50)  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = re.findall(r"\bOMP_NUM_THREADS=(\d+) ", done.stdout)
    assert said == [str(threads_per_process(ranks))], done.stdout
