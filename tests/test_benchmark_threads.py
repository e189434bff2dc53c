"""The benchmark scripts: the allreduce one's thread defaults, set before numpy is imported;
the GPU one's arguments, and the checkout it leaves as it found it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks" / "allreduce.py"
LOAD = (
    "import importlib.util, os, sys\n"
    "spec = importlib.util.spec_from_file_location('allreduce_bench', sys.argv[1])\n"
    "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
    "print(os.environ.get('DISTCONV_NUM_THREADS'))\n"
)


@pytest.mark.parametrize("given, expected", [(None, "None"), ("3", "3")])
def test_the_allreduce_benchmark_sets_no_kernel_thread_count_of_its_own(given, expected):
    """Its MPI rows inherit the driver's environment and run no distconv kernels: a count it
    set would be read as one set by hand (the communication thread then polls, where every
    recorded run waited in MPI_Wait); a caller's own stays (its CNN jobs set one each)."""
    env = {k: v for k, v in os.environ.items() if k != "DISTCONV_NUM_THREADS"}
    if given is not None:
        env["DISTCONV_NUM_THREADS"] = given
    out = subprocess.run(
        [sys.executable, "-c", LOAD, str(BENCH)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip().splitlines()[-1] == expected


@pytest.mark.timeout(60)
@pytest.mark.parametrize("argv, status, words", [(["--help"], 0, "usage: gpu.py"), (["-x"], 2, "")])
def test_the_gpu_benchmark_reads_its_arguments_before_it_runs_anything(argv, status, words):
    """``--help`` ran the device tests, then failed at ``import cupy``."""
    gpu = BENCH.parent / "gpu.py"
    out = subprocess.run(
        [sys.executable, str(gpu), *argv], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == status, out.stdout + out.stderr
    assert words in out.stdout and "passed" not in out.stdout and "skipped" not in out.stdout


@pytest.mark.timeout(120)
def test_the_gpu_benchmark_leaves_no_cache_in_the_checkout(tmp_path):
    """Its pytest run left ``.pytest_cache/`` and pytest-benchmark's ``.benchmarks/`` in the
    checkout it measured. Run here in a copy (no device: its tests skip, then it stops)."""
    root = BENCH.parent.parent
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".benchmarks")
    for folder in ("distconv", "launcher", "tests", "benchmarks"):
        shutil.copytree(root / folder, tmp_path / folder, ignore=ignore)
    shutil.copy(root / "pyproject.toml", tmp_path)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run(
        [sys.executable, str(tmp_path / "benchmarks" / "gpu.py")],
        env=env,
        capture_output=True,
        timeout=100,
    )
    assert not (tmp_path / ".pytest_cache").exists()
    assert not (tmp_path / ".benchmarks").exists()
