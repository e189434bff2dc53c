"""A kernel thread count set by hand is the job's share of its host: the MPI sync's
communication thread neither spins on, nor counts as spare, the cores above it (another job's,
as docs/operations.md tells jobs that share a host to set it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.cores import LOCAL_SIZE_VARS
from distconv.sync.mpi.comm import POLL_SECONDS, NodeShare, SingleRankComm, want_thread
from tests.child_env import child_path
from tests.mpi.common import mpi_env, mpiexec
from tests.processes import run_job


def _choice(share: NodeShare, requested: bool | None, on_gpu: bool) -> float | None:
    """What thread_poll_seconds decides on two ranks that agree: None for no thread."""
    if not want_thread(requested, 2, on_gpu, share.cores, share.busy(on_gpu), None):
        return None
    return share.poll(on_gpu)


@pytest.mark.parametrize(
    "share, requested, on_gpu, expected",
    [
        # two jobs of 2 ranks x 4 kernel threads on 16 cores (the docs' advice): each job's
        # 8 cores compute; the other 8 are the other job's, not spare
        (NodeShare(16, 2, 4, by_hand=True), None, False, None),
        (NodeShare(16, 2, 4, by_hand=True), True, False, POLL_SECONDS),  # asked for: polls
        # GPU: each rank's main thread takes one of the job's 8 cores, 6 left: the threads spin
        (NodeShare(16, 2, 4, by_hand=True), None, True, 0.0),
        # GPU, 1 thread each by hand: the job's 2 cores are the main threads': no spinning
        (NodeShare(16, 2, 1, by_hand=True), None, True, POLL_SECONDS),
        # nothing set: unchanged, the cores over the ranks (8 each) fill the host
        (NodeShare(16, 2, 8, by_hand=False), None, False, None),
        (NodeShare(16, 2, 8, by_hand=False), None, True, 0.0),
        # a launcher that narrowed each rank's cores: the kernel threads leave spare ones
        (NodeShare(16, 2, 4, by_hand=False), None, False, 0.0),
        # a count by hand that fills the host decides as nothing set would
        (NodeShare(16, 2, 8, by_hand=True), None, False, None),
        (NodeShare(16, 2, 8, by_hand=True), True, False, POLL_SECONDS),
        # benchmarks/allreduce.py's CNN runs (1 thread each) on 2 cores: as before, no thread
        # left to choose, a forced one polls
        (NodeShare(2, 2, 1, by_hand=True), None, False, None),
        (NodeShare(2, 2, 1, by_hand=True), True, False, POLL_SECONDS),
    ],
)
def test_a_thread_count_set_by_hand_is_the_jobs_share_of_the_host(
    share, requested, on_gpu, expected
):
    assert _choice(share, requested, on_gpu) == expected


def test_the_cores_counted_are_the_ranks_threads_set_by_hand_at_most():
    assert NodeShare(16, 2, 4, by_hand=True).cores == 8
    assert NodeShare(16, 2, 4, by_hand=False).cores == 16
    assert NodeShare(4, 2, 4, by_hand=True).cores == 4  # more threads than cores: the cores


@pytest.mark.parametrize("threads, by_hand", [("3", True), ("", False), (None, False)])
def test_the_share_here_reads_the_variable(monkeypatch, threads, by_hand):
    """An empty DISTCONV_NUM_THREADS is unset, as num_threads reads it."""
    for name in LOCAL_SIZE_VARS:  # this process alone on its host: its threads, its cores
        monkeypatch.delenv(name, raising=False)
    if threads is None:
        monkeypatch.delenv("DISTCONV_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("DISTCONV_NUM_THREADS", threads)
    share = NodeShare.here(SingleRankComm(), None)
    assert (share.ranks, share.by_hand) == (1, by_hand)
    assert share.threads == (3 if by_hand else share.usable)


@pytest.mark.mpi  # as NEEDS_MPIEXEC marks a module; the tests above need no MPI
@pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed")
@pytest.mark.timeout(120)
def test_two_ranks_with_threads_set_by_hand_say_they_run_no_spinning_thread(tmp_path):
    """``mpiexec -n 2 distconv -v train`` with 1 kernel thread each set by hand. MPICH is
    told to treat its ranks as on nodes of their own (``MPIR_CVAR_NOLOCAL``): each rank is
    then its node's only one, and the cores its thread used to count as spare are the
    other's."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    env = {**mpi_env(), "DISTCONV_NUM_THREADS": "1", "MPIR_CVAR_NOLOCAL": "1"}
    train = [sys.executable, "-m", "mpi4py", "-m", "distconv", "-v", "train", "--sync", "mpi"]
    train += ["--data", "synthetic", "--epochs", "1", "--no-progress", "--out", str(tmp_path)]
    proc = run_job([mpiexec(), "-n", "2", *train], env, timeout=100, start_new_session=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if "communication thread:" in line]
    assert len(said) == 2, proc.stderr[-3000:]
    for line in said:
        assert "communication thread: none (" in line, line
        assert "kernel threads 1 each (set by hand)" in line, line


#: the benchmark whose MPI rows measure the sync's own choice
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "allreduce.py"


def test_the_allreduce_benchmark_sets_no_share_for_its_mpi_rows():
    """benchmarks/allreduce.py's MPI rows (``auto``: the sync's choice) run no distconv kernels:
    a ``DISTCONV_NUM_THREADS`` it set at import would be read as their job's share of the host,
    and a 1-rank sync's choice on 2 cores (``free_step_local``) would change with it; its CNN
    jobs, which run the kernels, still set one thread each."""
    show = "import os, runpy, sys; m = runpy.run_path(sys.argv[1]); "
    show += "print(os.environ.get('DISTCONV_NUM_THREADS'), m['ONE_THREAD']['DISTCONV_NUM_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k != "DISTCONV_NUM_THREADS"}
    env["PYTHONPATH"] = child_path()
    argv = [sys.executable, "-c", show, str(BENCH)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["None", "1"], done.stdout
