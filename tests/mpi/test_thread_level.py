"""The communication thread respects the thread level MPI was initialised with (real mpiexec).

mpi4py asks for ``MPI_THREAD_MULTIPLE`` unless ``mpi4py.rc.thread_level`` says otherwise; the
scripts here set it with ``python -m mpi4py -rc thread_level=...``, before MPI starts.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from tests.mpi.common import (
    NEEDS_MPIEXEC,
    max_relative,
    params_of,
    reference,
    run_mpi,
    run_ranks,
    script,
)
from tests.mpi.one_call_at_a_time import OneCallAtATime
from tests.mpi.run_param_changes import OPTIMIZER, run

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

WHY = "no communication thread; gradient buckets are reduced on the main thread"


@pytest.mark.parametrize("level", ["single", "funneled"])
def test_below_serialized_no_thread_runs_and_the_reason_is_logged_once(tmp_path, level):
    options = ("--overlap", "1", "--bucket-bytes", "300")
    ranks, proc = run_ranks(tmp_path, "adam", *options, thread_level=level)
    assert not any(bool(r["_overlap"]) for r in ranks)
    assert proc.stderr.count(WHY) == 2, proc.stderr  # once per rank, though 4 steps ran
    assert f"thread level {level!r}" in proc.stderr
    expected = reference("adam")  # reduced on the main thread, still the right answer
    for name in expected:
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name])
    assert max_relative(params_of(ranks[0]), expected) <= 1e-10


def test_serialized_is_enough_for_the_thread(tmp_path):
    """The main thread calls MPI only while the thread is idle: SERIALIZED's discipline."""
    options = ("--overlap", "1", "--bucket-bytes", "300")
    ranks, proc = run_ranks(tmp_path, "adam", *options, thread_level="serialized")
    assert all(bool(r["_overlap"]) for r in ranks)
    assert WHY not in proc.stderr
    assert max_relative(params_of(ranks[0]), reference("adam")) <= 1e-10


def test_ranks_that_could_differ_on_the_thread_all_take_the_same_path(tmp_path):
    # the thread and the main-thread pump start their collectives in different orders, so a
    # job whose ranks choose differently could hang: every rank takes the path all can take
    options = [str(tmp_path), "adam", "--overlap", "1", "--bucket-bytes", "300"]
    proc = run_mpi(
        ["-n", "1", *script("run_train.py", "serialized"), *options]
        + [":", "-n", "1", *script("run_train.py", "single"), *options]
    )
    assert proc.returncode == 0, proc.stderr
    ranks = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(2)]
    assert [bool(r["_overlap"]) for r in ranks] == [False, False]
    assert max_relative(params_of(ranks[0]), reference("adam")) <= 1e-10


def test_under_serialized_no_two_threads_are_ever_inside_mpi_at_once(tmp_path):
    """Every MPI call of both ranks logged (:mod:`tests.mpi.one_call_at_a_time`), with a
    parameter that fires on one rank only, so the flags' exchange runs on the thread: the
    main thread and the thread both call MPI, never at the same time."""
    command = [*script("run_param_changes.py", "serialized"), str(tmp_path), "unused", "1"]
    proc = run_mpi(["-n", "2", *command, "watch"])
    assert proc.returncode == 0, proc.stderr
    want = run(LocalSync(create_optimizer(OPTIMIZER, lr=0.1)), "unused", [0, 1])
    for rank in (0, 1):
        calls = json.loads((tmp_path / f"calls{rank}.json").read_text())
        assert calls["overlaps"] == []
        assert calls["by_thread"]["MainThread"] > 0 and calls["by_thread"]["distconv-allreduce"] > 0
        got = dict(np.load(tmp_path / f"values{rank}.npz"))
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-12, atol=0, err_msg=name)


class Slow:
    """Something with a call that blocks until told, and one that returns a request."""

    def __init__(self) -> None:
        self.entered, self.go_on = threading.Event(), threading.Event()

    def Wait(self) -> None:  # noqa: N802
        self.entered.set()
        self.go_on.wait(10)

    def Get_rank(self) -> int:  # noqa: N802
        return 0

    def Irecv(self) -> Slow:  # noqa: N802
        return self

    def Test(self) -> bool:  # noqa: N802
        return True


def test_the_call_log_sees_two_threads_inside_at_once_and_not_one_after_the_other():
    slow = Slow()
    comm = OneCallAtATime(slow)
    request = comm.Irecv()
    assert isinstance(request, OneCallAtATime)  # a request is logged too
    waiting = threading.Thread(target=request.Wait, name="waiter")
    waiting.start()
    assert slow.entered.wait(10)
    comm.Get_rank()  # while the waiter is inside Wait
    slow.go_on.set()
    waiting.join(10)
    comm.Get_rank()  # after it
    assert comm.log.overlaps == ["Get_rank on MainThread while Wait on waiter"]
    assert comm.log.by_thread == {"MainThread": 3, "waiter": 1}
