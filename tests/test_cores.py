"""The cores a process may use (affinity and a container's CPU quota), and how many of the
job's processes its launcher says share its host.

The kernel writes cgroup v2's ``cpu.max`` as "max" or a positive quota, then a positive period
(Documentation/admin-guide/cgroup-v2.rst, "cpu.max"); anything else in the file is malformed:
no count comes of it (the affinity mask stands), and a warning says so, not a crash and not
one core read silently. A local size is read as an ASCII integer with an optional plus sign;
anything else is skipped for the next launcher's variable."""

from __future__ import annotations

import logging
import os

import pytest

from distconv.cores import processes_on_this_host, usable_cores


def _cores(tmp_path, monkeypatch, files: dict[str, str], affinity: int = 64) -> int:
    """usable_cores of the cgroup ``files`` written under ``tmp_path``, ``affinity`` cores."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(affinity)))
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    return usable_cores(tmp_path)


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
    want = affinity if cores is None else min(affinity, cores)
    assert _cores(tmp_path, monkeypatch, files, affinity) == want


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


@pytest.mark.parametrize(
    "text",
    [
        "200000 0\n",  # period 0: was ZeroDivisionError
        "200000 -100000\n",  # a negative period: was a negative count, read as one core
        "-100000 100000\n",  # a negative quota (v1's "-1" written in v2): was one core
        "-1 100000\n",
        "0 100000\n",  # no quota the kernel takes
        "1.5 100000\n",  # and text that is no number: silent before
        "max\n",
        "\n",
    ],
)
def test_a_cpu_max_the_kernel_never_writes_is_no_quota_and_a_warning(
    tmp_path, monkeypatch, caplog, text
):
    with caplog.at_level(logging.WARNING, logger="distconv.cores"):
        assert _cores(tmp_path, monkeypatch, {"cpu.max": text}) == 64
    assert "cpu.max" in caplog.text and text.strip() in caplog.text


def test_a_malformed_cpu_max_still_lets_a_v1_quota_count(tmp_path, monkeypatch, caplog):
    files = {
        "cpu.max": "300000 0\n",
        "cpu/cpu.cfs_quota_us": "300000\n",
        "cpu/cpu.cfs_period_us": "100000\n",
    }
    with caplog.at_level(logging.WARNING, logger="distconv.cores"):
        assert _cores(tmp_path, monkeypatch, files) == 3
    assert "cpu.max" in caplog.text


def test_a_v1_period_of_zero_is_no_quota_and_a_warning(tmp_path, monkeypatch, caplog):
    files = {"cpu.cfs_quota_us": "200000\n", "cpu.cfs_period_us": "0\n"}
    with caplog.at_level(logging.WARNING, logger="distconv.cores"):
        assert _cores(tmp_path, monkeypatch, files) == 64
    assert "cpu.cfs_period_us" in caplog.text


def test_v1_no_limit_and_v2_max_warn_nothing(tmp_path, monkeypatch, caplog):
    with caplog.at_level(logging.WARNING, logger="distconv.cores"):
        (tmp_path / "none").mkdir()
        assert _cores(tmp_path / "none", monkeypatch, {}) == 64
        (tmp_path / "a").mkdir()
        assert _cores(tmp_path / "a", monkeypatch, {"cpu.max": "max 100000\n"}) == 64
        (tmp_path / "b").mkdir()
        v1 = {"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "100000\n"}
        assert _cores(tmp_path / "b", monkeypatch, v1) == 64
        (tmp_path / "c").mkdir()
        assert _cores(tmp_path / "c", monkeypatch, {"cpu.max": "250000 100000\n"}) == 3
    assert caplog.text == ""


def test_a_local_size_in_other_digits_is_skipped_not_a_crash():
    assert processes_on_this_host({"MPI_LOCALNRANKS": "²"}) == 1
    assert processes_on_this_host({"MPI_LOCALNRANKS": "²", "LOCAL_WORLD_SIZE": "3"}) == 3
    assert processes_on_this_host({"OMPI_COMM_WORLD_LOCAL_SIZE": "٣"}) == 1


def test_a_local_size_with_a_plus_sign_counts_as_the_number_it_is():
    # int() reads "+2" as 2, a positive integer as the docstring asks: it was passed over,
    # and two ranks side by side each took every core
    assert processes_on_this_host({"LOCAL_WORLD_SIZE": "+2"}) == 2
    assert processes_on_this_host({"MPI_LOCALNRANKS": " +4 ", "LOCAL_WORLD_SIZE": "2"}) == 4
    # still no count: zero, a minus sign, two signs, a sign alone
    for text in ("+0", "-2", "++2", "+", "+-2", "+ 2"):
        assert processes_on_this_host({"MPI_LOCALNRANKS": text}) == 1, text
