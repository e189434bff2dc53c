"""cgroup CPU quotas the kernel never writes.

The kernel writes cgroup v2's ``cpu.max`` as "max" or a positive quota, then a positive period
(Documentation/admin-guide/cgroup-v2.rst, "cpu.max"); anything else in the file is malformed:
no count comes of it (the affinity mask stands), and a warning says so, not a crash and not
one core read silently.
"""

from __future__ import annotations

import logging
import os

import pytest

from distconv.cores import usable_cores


def _cores(tmp_path, monkeypatch, files: dict[str, str], affinity: int = 64) -> int:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(affinity)))
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    return usable_cores(tmp_path)


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
