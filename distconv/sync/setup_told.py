"""Telling the other ranks that this rank's setup cannot run: :func:`tell_setup_failed`, which
the Trainer calls where its own work before ``setup`` failed on this rank alone (a checkpoint
refused on the chief), so the others, waiting in their setup, raise an error naming it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from distconv.notes import add_note

if TYPE_CHECKING:  # base imports this module: the class is only a type here
    from distconv.sync.base import SyncStrategy


def tell_setup_failed(sync: SyncStrategy, error: Exception) -> None:
    """``sync.fail_setup(error)``, the caller raising ``error`` next: it stays the cause."""
    try:
        sync.fail_setup(error)
    except Exception as failed:  # a strategy's own: noted
        add_note(error, f"telling the other ranks failed too: {failed!r}")
