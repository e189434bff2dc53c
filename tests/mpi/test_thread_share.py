"""A kernel thread count set by hand may be a job's share of a shared host (docs/operations.md
tells jobs that share one to set it): the MPI sync's communication thread then never spins in
MPI_Wait on the cores above it (another job's, maybe), but polls between short sleeps; it is
still chosen as before, so a dedicated host's overlap is kept."""

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
    if not want_thread(requested, 2, on_gpu, share.usable, share.busy(on_gpu), None):
        return None
    return share.poll(on_gpu)


@pytest.mark.parametrize(
    "share, requested, on_gpu, expected",
    [
        # two jobs of 2 ranks x 4 kernel threads on 16 cores (the docs' advice): a thread, as
        # before, but polling: the 8 cores above the job's may be the other job's
        (NodeShare(16, 2, 4, by_hand=True), None, False, POLL_SECONDS),
        (NodeShare(16, 2, 4, by_hand=True), True, False, POLL_SECONDS),
        (NodeShare(16, 2, 4, by_hand=True), None, True, POLL_SECONDS),  # GPU: polls too
        (NodeShare(16, 2, 4, by_hand=True), False, False, None),  # asked for none: none
        # nothing set: unchanged, the cores over the ranks (8 each) fill the host
        (NodeShare(16, 2, 8, by_hand=False), None, False, None),
        (NodeShare(16, 2, 8, by_hand=False), None, True, 0.0),
        # a launcher that narrowed each rank's cores: the kernel threads leave spare ones
        (NodeShare(16, 2, 4, by_hand=False), None, False, 0.0),
        # a count by hand that fills the host: no core left, no thread, a forced one polls
        (NodeShare(16, 2, 8, by_hand=True), None, False, None),
        (NodeShare(16, 2, 8, by_hand=True), True, False, POLL_SECONDS),
        (NodeShare(2, 2, 1, by_hand=True), None, False, None),
    ],
)
def test_a_thread_count_set_by_hand_never_spins_but_keeps_the_thread(
    share, requested, on_gpu, expected
):
    assert _choice(share, requested, on_gpu) == expected


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
    then its node's only one, and the core its thread used to spin on may be the other's:
    it polls there instead."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    env = {**mpi_env(), "DISTCONV_NUM_THREADS": "1", "MPIR_CVAR_NOLOCAL": "1"}
    train = [sys.executable, "-m", "mpi4py", "-m", "distconv", "-v", "train", "--sync", "mpi"]
    train += ["--data", "synthetic", "--epochs", "1", "--no-progress", "--out", str(tmp_path)]
    proc = run_job([mpiexec(), "-n", "2", *train], env, timeout=100, start_new_session=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [line for line in proc.stderr.splitlines() if "communication thread:" in line]
    assert len(said) == 2, proc.stderr[-3000:]
    for line in said:
        assert "communication thread: polls every 5e-05 s (" in line, line
        assert "kernel threads 1 each (set by hand)" in line, line


#: the benchmark whose MPI rows measure the sync's own choice
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "allreduce.py"


def test_the_allreduce_benchmark_sets_no_share_for_its_mpi_rows():
    """benchmarks/allreduce.py's MPI rows (``auto``: the sync's choice) run no distconv kernels:
    a ``DISTCONV_NUM_THREADS`` it set at import would count as set by hand, whose thread always
    polls, and a 1-rank sync on 2 cores (``free_step_local``) would poll where it waited in
    ``MPI_Wait`` before; its CNN jobs, which run the kernels, still set one thread each."""
    show = "import os, runpy, sys; m = runpy.run_path(sys.argv[1]); "
    show += "print(os.environ.get('DISTCONV_NUM_THREADS'), m['ONE_THREAD']['DISTCONV_NUM_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k != "DISTCONV_NUM_THREADS"}
    env["PYTHONPATH"] = child_path()
    argv = [sys.executable, "-c", show, str(BENCH)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["None", "1"], done.stdout
