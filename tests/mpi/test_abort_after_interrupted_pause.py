"""An aborting rank's ``Abort`` goes out even where a Ctrl-C cuts the pause that forwards its
last words short (``leaving._abort``): the other ranks would wait for this one for ever."""

from __future__ import annotations

import threading

import pytest

from distconv.sync.mpi import leaving

pytestmark = pytest.mark.timeout(10)


class _Comm:
    """A stand-in communicator whose ``Abort`` records its status and returns."""

    def __init__(self) -> None:
        self.aborted: list[int] = []

    def Abort(self, status: int) -> None:  # noqa: N802 - mpi4py's name
        self.aborted.append(status)


def _interrupted_pause() -> None:
    raise KeyboardInterrupt


def test_a_ctrl_c_in_the_pause_skips_not_the_abort(monkeypatch):
    exits: list[int] = []
    # never armed: a real last resort would SIGKILL this process should the test go wrong
    monkeypatch.setattr(leaving, "last_resort", lambda: threading.Timer(60, lambda: None))
    monkeypatch.setattr(leaving, "let_forward", _interrupted_pause)
    monkeypatch.setattr(leaving, "_exit", exits.append)
    comm = _Comm()
    with pytest.raises(KeyboardInterrupt):  # the stand-in _exit returns: it goes on up
        leaving.abort(comm, 3)
    assert (comm.aborted, exits) == ([3], [3])
