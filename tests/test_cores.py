"""The cores a process may use (affinity and a container's CPU quota), and how many of the
job's processes its launcher says share its host."""

from __future__ import annotations

import os

import pytest

from distconv.cores import processes_on_this_host, usable_cores


@pytest.mark.parametrize(
    "files, cores",
    [
        ({}, None),  # no cgroup files: the affinity mask alone
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu.max": "150000 100000\n"}, 2),  # 1.5 CPUs: two cores run threads
        ({"cpu.max": "100000 100000\n"}, 1),
        ({"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 2),
        (
            {
                "cpu,cpuacct/cpu.cfs_quota_us": "50000\n",
                "cpu,cpuacct/cpu.cfs_period_us": "100000\n",
            },
            1,
        ),
    ],
)
@pytest.mark.parametrize("affinity", [64, 1])
def test_usable_cores_counts_the_cgroup_quota(tmp_path, monkeypatch, files, cores, affinity):
    # an affinity of 64 tells every quota here from none on any machine (on 2 cores a quota of
    # 2 reads the same as no quota); 1: the quota never raises the count
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(affinity)))
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    assert usable_cores(tmp_path) == (affinity if cores is None else min(affinity, cores))


def test_processes_on_this_host_come_from_the_launcher_that_started_this_one():
    assert processes_on_this_host({}) == 1
    assert processes_on_this_host({"MPI_LOCALNRANKS": "2"}) == 2  # MPICH's Hydra
    assert processes_on_this_host({"OMPI_COMM_WORLD_LOCAL_SIZE": "4"}) == 4  # Open MPI
    # the mpiexec that started this process says it for this process: it comes first
    assert processes_on_this_host({"LOCAL_WORLD_SIZE": "3", "MPI_LOCALNRANKS": "2"}) == 2
    assert processes_on_this_host({"LOCAL_WORLD_SIZE": "3"}) == 3  # torchrun
    # a value that says nothing is passed over for the next
    assert processes_on_this_host({"MPI_LOCALNRANKS": "0", "LOCAL_WORLD_SIZE": " 2 "}) == 2
    assert processes_on_this_host({"LOCAL_WORLD_SIZE": "x", "MPI_LOCALNRANKS": "-1"}) == 1


def test_the_quota_once_read_costs_no_path_per_call(tmp_path, monkeypatch):
    """num_threads asks on every kernel call: after the first read only a cache lookup."""
    from distconv import cores

    (tmp_path / "cpu.max").write_text("100000 100000\n")
    assert usable_cores(tmp_path) == 1

    def no_path(*args):
        raise AssertionError("a Path built for a quota already read")

    monkeypatch.setattr(cores, "Path", no_path)
    assert usable_cores(tmp_path) == 1 and usable_cores(str(tmp_path)) == 1


def test_without_an_affinity_mask_every_core_counts(tmp_path, monkeypatch):
    """Not Linux: os.cpu_count() (capped by a quota), not one core."""
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert usable_cores(tmp_path) == 8
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "cpu.max").write_text("200000 100000\n")
    assert usable_cores(tmp_path / "q") == 2
