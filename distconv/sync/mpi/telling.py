"""How a rank tells the others an error raised on it alone, in the collective they wait in: the
error's text (:func:`error_text`), the collective made with it (:func:`tell_error`), and a note
on the error that they were told, before it is raised on this rank."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from distconv.sync.base import SyncError


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


def tell_error(error: BaseException, exchange: Callable[[str], Any], note: str) -> None:
    """Make ``exchange`` (the collective the other ranks wait in) with ``error``'s
    :func:`error_text`, its own SyncError dropped (``error``, raised next, is this rank's
    cause), and note on ``error`` that the others were told (``note``)."""
    with contextlib.suppress(SyncError):
        exchange(error_text(error))
    if hasattr(error, "add_note"):  # Python 3.11 on
        error.add_note(note)
