"""What a call on a closed sync is told: the call refused, and the way on. A closed sync takes
no more calls, and a :class:`~distconv.trainer.Trainer` keeps the sync it was made with, so a
new sync alone is no way on for a script that trains through one: a new Trainer on it is.

The sync's own guard (:func:`~distconv.sync.closing.refuse_closed`) names the strategy's call,
``LocalSync.allreduce_sum()``, which a script that called ``trainer.evaluate()`` never made;
:func:`refuse_closed_trainer`, asked at the Trainer's entry points, names the Trainer's.
"""

from __future__ import annotations

from typing import Any

from distconv.sync.errors import SyncError

#: the way on from a closed sync, for a script with or without a Trainer
WAY_ON = (
    "make a new sync to go on, and a new Trainer on it where a Trainer holds this one "
    "(evaluate and save state before closing)"
)

#: the way on where the call came through a Trainer, which holds the closed sync
TRAINER_WAY_ON = "make a new sync and a new Trainer on it (evaluate and save state before closing)"


def closed_refusal(sync: Any, call: str) -> SyncError:
    """The refusal of ``sync``'s own ``call`` (``"allreduce_sum"``) once it is closed."""
    return SyncError(f"{type(sync).__name__}.{call}() called after close(): {WAY_ON}")


def refuse_closed_trainer(sync: Any, call: str) -> None:
    """Refuse the Trainer's ``call`` (``"evaluate"``, ``"fit"``) where its ``sync`` is closed,
    before anything is read or sent: the Trainer's public call named, not the sync's call it
    would reach (``setup``, ``allreduce_sum``), with the way on.

    Raises:
        SyncError: ``Trainer.evaluate() called after its LocalSync was closed: ...``.
    """
    if getattr(sync, "closed", False) is True:  # SyncStrategy's flag, set by close()
        closed = f"its {type(sync).__name__} was closed"
        raise SyncError(f"Trainer.{call}() called after {closed}: {TRAINER_WAY_ON}")
