"""A fit's second Ctrl-C held back while a sync applies a step's updates, so it never splits one.

A second Ctrl-C during a fit raises :class:`KeyboardInterrupt` at once
(:mod:`distconv.stop_request`), for a job stuck where no step ends. Raised between two
parameters' updates it left the weights in no step at all: some updated, the others not, which
``evaluate`` scored and the next ``fit`` trained on. So while a sync applies its updates
(:class:`UpdateHold`: LocalSync from a step's first update, in backward, to its
``finish_step``; MPISync over its update loop, once every reduction is in) the interrupt is
held and raised once they are whole. Inside the Trainer's :func:`counting_step` it waits until
the step is counted too, so the Trainer's position names the step the weights hold. Nothing is
held before the first update (forward, backward's waits, a collective): there the second Ctrl-C
still stops at once, and leaves the last whole step. A third Ctrl-C, while the second is held,
stops at once wherever it lands: a hold must never keep a person from stopping a step that
does not end.

Only a fit's own handler holds (:meth:`~distconv.stop_request.StopRequest`), on the main
thread, where Python runs signal handlers: a Ctrl-C outside a fit is Python's own.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: the holds under way (weakly: a sync dropped mid-step holds nothing)
_holding: weakref.WeakSet[UpdateHold] = weakref.WeakSet()
#: the Trainer's steps being counted, and whether a hold began within them
_counting = 0
_began_in_count = False
#: the interrupt held: the handler's own raise, called once nothing holds
_held: Callable[[], None] | None = None


class UpdateHold:
    """One sync's hold over the updates of the step under way (reusable, step after step).

    :meth:`begin` before the first update (again: no change), :meth:`end` once every update
    is made (raising the interrupt held, unless a counted step or another hold keeps it), or
    :meth:`drop` where the step ends unfinished (an error goes on: the interrupt held is
    dropped with it, as the fit ends by that error). On another thread than the main one,
    each does nothing."""

    def begin(self) -> None:
        global _began_in_count
        if _on_main_thread():
            _holding.add(self)
            _began_in_count = _counting > 0

    def end(self) -> None:
        if _on_main_thread():
            _holding.discard(self)
            _raise_once_free()

    def drop(self) -> None:
        global _held
        if _on_main_thread():
            _holding.discard(self)
            if not holding():
                _held = None


@contextmanager
def counting_step() -> Iterator[None]:
    """The Trainer's end of a step: a Ctrl-C a sync's hold began holding in the body (or
    before it, LocalSync's in backward) waits for the body's end, where the step is counted.
    Holds nothing by itself: a sync's waits before its updates stay interruptible."""
    global _counting, _began_in_count, _held
    if not _on_main_thread():  # (ranks as threads, in tests): the main thread's state alone
        yield
        return
    _counting += 1
    _began_in_count = _began_in_count or bool(_holding)
    try:
        yield
    except BaseException:
        _counting -= 1
        if not holding():
            _held = None  # the step ends by that error
        _began_in_count = _began_in_count and _counting > 0
        raise
    _counting -= 1
    _raise_once_free()


def holding() -> bool:
    """Whether a second Ctrl-C now would split a step's updates, or the count of a step whose
    updates are made."""
    return bool(_holding) or (_counting > 0 and _began_in_count)


def hold_interrupt(raise_it: Callable[[], None]) -> bool:
    """Hold the interrupt ``raise_it`` raises while :func:`holding`; False: raise it now,
    where nothing holds, or where one is held already. A Ctrl-C again (a person's third)
    stops at once, even part-way through a step's updates (said as such a step is): a hold
    waits for work that may never end (a stuck layer's backward, after the step's first
    update; a collective of a dead rank's), and Ctrl-C is then the only way out left."""
    global _held
    if not holding() or _held is not None:
        return False
    _held = raise_it
    return True


def _on_main_thread() -> bool:
    """Whether this is the main thread, the one thread whose holds count and that raises the
    interrupt held: Python runs signal handlers there alone, and another thread (a test's rank,
    a sync's own) ending its step must not raise the main thread's Ctrl-C in itself."""
    return threading.current_thread() is threading.main_thread()


def _raise_once_free() -> None:
    """Raise the interrupt held, where nothing holds any more."""
    global _held, _began_in_count
    if holding():
        return
    if _counting == 0:
        _began_in_count = False
    raise_it, _held = _held, None
    if raise_it is not None:
        raise_it()
