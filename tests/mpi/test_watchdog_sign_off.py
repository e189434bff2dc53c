"""A Ctrl-C raised in a watched call's sign-off leaves no watchdog entry, wherever it lands.

A SIGINT's handler runs on the main thread between the steps of its Python code. One raised
after a watched wait returned but before the watchdog's entry was popped (a second Ctrl-C: the
first one's wait is not made again) left the entry; a rank that then made no watched call for
the timeout (a checkpoint saved after the interrupt) was stopped by the watchdog for a stall in
a call long over. setup, close and the step check make their waits through the same wrappers as
finish_step: the entry must be cleared in the watchdog itself, not in each caller's failure path.

The tests raise a KeyboardInterrupt, as the handler would, at each line event (and call) of
watchdog.py that comes after the wrapped call returned, one place per run. No MPI: stand-ins
for the communicator and its request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from distconv.sync.mpi.watchdog import Watchdog, WatchedComm
from tests.mpi.sign_off import interrupting

pytestmark = pytest.mark.timeout(30)


class Request:
    """A non-blocking collective's request whose Wait returns at once."""

    def Wait(self) -> None:  # noqa: N802 - mpi4py's spelling
        pass

    def Test(self) -> bool:  # noqa: N802
        return True


class Comm:
    """A communicator: a blocking Allreduce and a non-blocking Iallreduce, both done at once."""

    def Allreduce(self, *args: Any) -> None:  # noqa: N802
        pass

    def Iallreduce(self, *args: Any) -> Request:  # noqa: N802
        return Request()


def waited(comm: WatchedComm) -> None:
    """The step check's wait: an Iallreduce's request, waited for."""
    comm.Iallreduce(None, None, None).Wait()


def blocking(comm: WatchedComm) -> None:
    """setup's and close's calls: a blocking collective."""
    comm.Allreduce(None, None, None)


@pytest.mark.parametrize("call", [waited, blocking])
def test_a_ctrl_c_anywhere_in_the_sign_off_leaves_no_entry(call: Callable[..., None]) -> None:
    """Whichever step of the sign-off the interrupt is raised at, the entry is gone."""
    places = 0
    while True:
        watchdog = Watchdog(None, print, 0)  # watches nothing: no thread, the entries kept
        with interrupting(("Wait", "Allreduce"), places + 1) as interrupts:
            try:
                call(WatchedComm(Comm(), watchdog, "job"))
            except KeyboardInterrupt:
                assert interrupts.raised
        if not interrupts.raised:  # fewer steps than that
            break
        places += 1
        assert watchdog._waits == {}, f"an entry left by a Ctrl-C at place {places}"
    assert places >= 1  # the sign-off had a place to interrupt


def test_the_call_is_watched_while_it_waits() -> None:
    """Inside the call, its entry names it; after it, none is left."""
    watchdog = Watchdog(None, print, 0)
    inside: list[dict[int, tuple[str, str, float]]] = []
    watchdog.call("the Wait of a test", lambda: inside.append(dict(watchdog._waits)))
    assert [what for (what, _, _) in inside[0].values()] == ["the Wait of a test"]
    assert watchdog._waits == {}


def test_a_watched_call_takes_any_keyword() -> None:
    """The wrapped call's keywords are its own, ``what`` and ``call`` too: the wrapper passed
    every keyword through before ``Watchdog.call``, whose own parameters must not take them."""
    watchdog = Watchdog(None, print, 0)
    comm = WatchedComm(Comm(), watchdog, "job")
    seen: list[dict[str, Any]] = []
    watched = comm._blocking("Allreduce", lambda **kwargs: seen.append(kwargs))
    watched(what="a keyword", call="another")
    assert seen == [{"what": "a keyword", "call": "another"}]
    assert watchdog.call("x", dict, what=1, call=2) == {"what": 1, "call": 2}
    assert watchdog._waits == {}
