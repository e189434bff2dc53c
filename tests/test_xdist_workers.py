"""``pytest -n logical`` (the README's test command) starts two workers per CPU this process
may run on, at most eight more than the CPUs, whether or not psutil is installed
(tests/conftest.py)."""

from __future__ import annotations

import os
import sys
import types

import pytest

pytest.importorskip("xdist", reason="pytest-xdist is not installed")
needs_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity"), reason="no sched_getaffinity on this platform"
)


@pytest.fixture
def host_wide_psutil(monkeypatch) -> int:
    """A psutil that counts more CPUs than this process may use, as psutil does on a host
    whose job is pinned (``taskset``, a container's ``--cpuset-cpus``); the count it gives."""
    usable = len(os.sched_getaffinity(0))
    fake = types.ModuleType("psutil")
    fake.cpu_count = lambda logical=True: usable + 7
    monkeypatch.setitem(sys.modules, "psutil", fake)
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    return usable + 7


def _workers(config, monkeypatch, numprocesses: str) -> int:
    """The count pytest-xdist takes for ``-n numprocesses``, through every hook implementation."""
    if not config.pluginmanager.hasplugin("xdist"):
        pytest.skip("pytest-xdist is not active (-p no:xdist)")
    monkeypatch.setattr(config.option, "numprocesses", numprocesses)
    return config.hook.pytest_xdist_auto_num_workers(config=config)


@needs_affinity
@pytest.mark.timeout(30)
def test_logical_counts_the_cpus_this_process_may_use(pytestconfig, monkeypatch, host_wide_psutil):
    usable = len(os.sched_getaffinity(0))
    assert _workers(pytestconfig, monkeypatch, "logical") == min(2 * usable, usable + 8)


@needs_affinity
@pytest.mark.timeout(30)
@pytest.mark.parametrize(("cpus", "workers"), [(1, 2), (2, 4), (8, 16), (9, 17), (64, 72)])
def test_logical_starts_two_workers_a_cpu_and_at_most_eight_more(
    pytestconfig, monkeypatch, host_wide_psutil, cpus, workers
):
    """The suite mostly waits, so two workers share a CPU; on a large host, each worker's
    children need CPUs too: the workers beyond one a CPU stop at eight."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)))
    assert _workers(pytestconfig, monkeypatch, "logical") == workers


@needs_affinity
@pytest.mark.timeout(30)
def test_the_environment_and_auto_keep_pytest_xdists_count(
    pytestconfig, monkeypatch, host_wide_psutil
):
    assert _workers(pytestconfig, monkeypatch, "auto") == host_wide_psutil
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "5")
    assert _workers(pytestconfig, monkeypatch, "logical") == 5
