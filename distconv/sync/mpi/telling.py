"""How a rank tells the others an error raised on it alone, in the collective they wait in: the
error's text (:func:`error_text`), the collective made with it (:func:`tell_error`), and a note
on the error that they were told, before it is raised on this rank; or, where that collective
was refused before it compared what the ranks said (as a meeting, or as ranks that counted
different steps), that they were not (:func:`untold`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distconv.notes import add_note
from distconv.sync.base import SyncError
from distconv.sync.mpi.comm import JobMismatch
from distconv.sync.mpi.step_check import steps_apart


def error_text(error: BaseException) -> str:
    """``"Type: text"`` of ``error``, as another rank is told it, never raising: where its
    ``__str__`` raises (user code), its type's name alone; made before the exchange, that
    raised on this rank alone, and the others waited in it until the watchdog's timeout. Text
    UTF-8 cannot encode (a lone surrogate) is escaped, as the exchange sends it encoded."""
    name = type(error).__name__
    try:
        text = f"{name}: {error}"
    except Exception:  # noqa: BLE001 - anything its __str__ raises
        return f"{name} (its text could not be made)"
    return text.encode(errors="backslashreplace").decode()


def tell_error(error: BaseException, exchange: Callable[[str], Any], note: str) -> SyncError | None:
    """Make ``exchange`` (the collective the other ranks wait in) with ``error``'s
    :func:`error_text`, its own SyncError dropped (``error``, raised next, is this rank's
    cause), and note on ``error`` that the others were told (``note``).

    Returns that SyncError, with no note made, where the others never saw ``error``, which the
    caller says (:func:`untold`): setup's job check refused as a meeting, another rank not in
    setup (at a meeting between steps, in a step, closing), refused where it was; or refused
    in its steps' exchange (:func:`~distconv.sync.mpi.step_check.steps_apart`), every rank in
    the check but counting different steps, before the descriptions that carry ``error`` were
    compared (a JobMismatch, raised on every rank alike all the same). Else None: told, the
    others' JobMismatch naming ``error``."""
    try:
        exchange(error_text(error))
    except JobMismatch as mismatch:  # raised on every rank alike: none is left waiting
        if steps_apart(mismatch):
            return mismatch
    except SyncError as refused:
        return refused
    add_note(error, note)
    return None


def untold(refused: SyncError) -> str:
    """That the other ranks were not told an error, ``refused`` (:func:`tell_error`'s) instead,
    in its words (what each rank was doing): where they were, or, a JobMismatch (the ranks
    counted different steps), in their job check."""
    where = "in their check" if isinstance(refused, JobMismatch) else "where they were"
    return f"the others were not told, only refused {where}: {refused}"
