"""The exception hook MPISync installs: print the error, then abort the whole job, always."""

from __future__ import annotations

import sys

import pytest

from distconv.sync.base import SyncError
from distconv.sync.mpi.comm import install_abort_hook
from distconv.sync.mpi.step_check import StepCheck


class AbortRecorder:
    """Stands in for a communicator: records Abort instead of ending the process."""

    def __init__(self) -> None:
        self.aborted: list[int] = []

    def Abort(self, code: int) -> None:  # noqa: N802 - mpi4py's name
        self.aborted.append(code)


def _raise_and_hook(error: BaseException) -> None:
    try:
        raise error
    except BaseException:
        sys.excepthook(*sys.exc_info())


def test_the_hook_prints_the_whole_error_then_aborts(capsys, monkeypatch):
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    comm = AbortRecorder()
    restore = install_abort_hook(comm)
    _raise_and_hook(ValueError("rank 1 fails on purpose"))
    restore()
    assert sys.excepthook is sys.__excepthook__
    assert comm.aborted == [1]
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "ValueError: rank 1 fails on purpose" in err


def test_the_job_aborts_even_when_printing_fails(monkeypatch):
    def broken_hook(*args):
        raise OSError("stderr is gone")

    monkeypatch.setattr(sys, "excepthook", broken_hook)
    comm = AbortRecorder()
    restore = install_abort_hook(comm)
    with pytest.raises(OSError, match="stderr is gone"):
        _raise_and_hook(ValueError("boom"))
    restore()
    assert comm.aborted == [1]


class FakeGather:
    """A two-rank ``Iallgather`` whose other rank sends ``theirs``."""

    def __init__(self, theirs: list[int]) -> None:
        self.theirs = theirs

    def Get_size(self) -> int:  # noqa: N802
        return 2

    def Get_rank(self) -> int:  # noqa: N802
        return 0

    def Iallgather(self, mine, every):  # noqa: N802
        every[0], every[1] = mine, self.theirs
        return type("Done", (), {"Wait": lambda self: None})()


def test_ranks_at_different_steps_are_named():
    check = StepCheck(FakeGather([2, 7, 8]))
    check.post(1, {"bucket 0": []}, 7, 8)
    with pytest.raises(SyncError, match=r"ranks are at different steps \(rank 0: 1, rank 1: 2\)"):
        check.complete()
    assert not check.pending


def test_agreeing_ranks_sum_their_examples():
    check = StepCheck(FakeGather([3, 7, 5]))
    check.post(3, {"bucket 0": []}, 7, 8)
    assert check.pending and check.complete() == 13 and check.complete() is None
