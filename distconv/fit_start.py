"""What :meth:`~distconv.trainer.Trainer.fit` does before its sync's setup, on this rank alone:
the inputs' facts, the checkpoint to resume from (the chief alone opens it), the parameters to
train and their layout. An error there may be this rank's alone (a checkpoint refused on the
chief), and the other ranks wait in their setup for it: ``fit`` tells them
(:func:`~distconv.sync.base.tell_setup_failed`) before raising it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from distconv.data import Arrays, data_facts
from distconv.resume import Position
from distconv.step_guard import ParamLayout

if TYPE_CHECKING:
    from distconv.trainer import Trainer


class FitStart(NamedTuple):
    """What fit goes on with: the inputs' facts (for the ranks' check), the restored state
    and position, and the model's structure (for the job check)."""

    data: dict[str, Any]
    state: Any
    pos: Position
    layers: Any


def start_fit(trainer: Trainer, train: Arrays, test: Arrays | None, resume: Any) -> FitStart:
    """Before ``trainer``'s sync's setup: open the checkpoints, take the parameters to train and
    lay them out (``trainer._layout``); see the module docstring."""
    data = data_facts(train, test, trainer.dtype)  # the inputs as cast: what trains
    state, pos = trainer.checkpoints.open(resume, data["train_data"])
    trainer._take_trainable()
    trainer.network.zero_grad()  # what a step cut short left (a second Ctrl-C, an error)
    layers = trainer.network.structure()  # every rank's model: the same, or stop
    names = {p.name for p in trainer.params}  # another model's firing order is due anew
    trainer._layout = ParamLayout(trainer.trainable, trainer.sync, names)  # what the sync keeps
    return FitStart(data, state, pos, layers)
