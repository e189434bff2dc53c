"""An aborting rank unlinks its MPICH shared-memory file even where a Ctrl-C cuts the pause that
forwards its last words short (``leaving._abort``).

906a9f84 moved the unlink after the pause (:func:`~distconv.sync.mpi.leaving.let_forward`), in
the same ``try``: a second Ctrl-C in the pause went to the ``finally`` and its ``Abort``, the
unlink skipped, and the file stayed in /dev/shm until the host rebooted. An
interrupted unlink skips neither the pause before it (906a9f84's point) nor the ``Abort``.
"""

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


@pytest.mark.parametrize("fails", ["pause", "unlink"])
def test_a_ctrl_c_in_the_pause_or_the_unlink_skips_neither_the_unlink_nor_the_abort(
    monkeypatch, fails
):
    events: list[str] = []

    def unlink() -> None:
        events.append("unlink")
        if fails == "unlink":
            raise KeyboardInterrupt

    exits: list[int] = []
    # never armed: a real last resort would SIGKILL this process should the test go wrong
    monkeypatch.setattr(leaving, "last_resort", lambda: threading.Timer(60, lambda: None))
    monkeypatch.setattr(leaving, "unlink_segments", unlink)
    if fails == "pause":
        monkeypatch.setattr(leaving, "let_forward", _interrupted_pause)
    else:
        monkeypatch.setattr(leaving, "let_forward", lambda: events.append("forward"))
    monkeypatch.setattr(leaving, "_exit", exits.append)
    comm = _Comm()
    with pytest.raises(KeyboardInterrupt):  # the stand-in _exit returns: it goes on up
        leaving.abort(comm, 3)
    # was: the unlink skipped after a Ctrl-C in the pause; before 906a9f84, one in the unlink
    # skipped the pause that forwards the line saying why
    assert events == (["unlink"] if fails == "pause" else ["forward", "unlink"])
    assert (comm.aborted, exits) == ([3], [3])
