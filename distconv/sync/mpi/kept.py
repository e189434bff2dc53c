"""A Ctrl-C kept for later where this rank's step must first complete the collectives the other
ranks wait in: the shared keeping of :mod:`~distconv.sync.mpi.updates` (the reduction) and
:mod:`~distconv.sync.mpi.last_pieces` (the flags and the last pieces). ``alone`` (or ``kept``)
is one step's list of this rank's failure so far: an interrupt there means this rank was asked
to stop, and a second one is raised at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def to_the_end(
    call: Callable[..., T],
    kept: list[BaseException],
    *args: Any,
    pending: Callable[[], bool] | None = None,
) -> T:
    """``call(*args)``, made again until it returns: a KeyboardInterrupt raised there (a Ctrl-C in
    a wait, raised once the wait returned) is kept in ``kept`` (:func:`keep`), not raised,
    unless ``kept`` holds one already (asked twice, this rank stops at once) or ``pending``
    says the call has nothing left to wait for (the interrupt is no wait's: the flags raise
    this rank's failed pack, :meth:`~.used.UsedParams.fail`). ``call`` must be safe to make
    again: a wait on a completed request returns at once."""
    while True:
        try:
            return call(*args)
        except KeyboardInterrupt as exc:  # this rank's alone: the others' collectives first
            if stopping(kept) or (pending and not pending()):
                raise
            keep(kept, exc)


def stopping(alone: list[BaseException]) -> bool:
    """Whether ``alone`` keeps an interrupt (not an Exception): this rank was asked to stop."""
    return bool(alone) and not isinstance(alone[0], Exception)


def keep(alone: list[BaseException], exc: BaseException) -> None:
    """Keep ``exc`` in ``alone``: the first only, but an interrupt after an error replaces it,
    that error its context (what was asked is to stop)."""
    if not alone:
        alone.append(exc)
    elif isinstance(alone[0], Exception) and not isinstance(exc, Exception):
        exc.__context__, alone[0] = alone[0], exc
