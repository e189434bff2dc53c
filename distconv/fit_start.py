"""What :meth:`~distconv.trainer.Trainer.fit` does before its sync's setup, on this rank alone:
the data sets checked and sampled, the inputs' facts, the checkpoint to resume from (the chief
alone opens it), the parameters to train and their layout. An error there may be this rank's
alone (a checkpoint refused on the chief, NaN in its data), and the other ranks wait in their
setup for it: ``fit`` tells them (:func:`~distconv.sync.base.tell_setup_failed`) before
raising it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, NamedTuple

from distconv.data import Arrays, array_length, as_arrays, data_facts
from distconv.resume import Position
from distconv.sampler import GlobalBatchSampler
from distconv.step_guard import ParamLayout
from distconv.trainer_args import refuse_not_finite

if TYPE_CHECKING:
    from distconv.trainer import Trainer

log = logging.getLogger("distconv.trainer")  # the warning fit said before


class FitStart(NamedTuple):
    """What fit goes on with: the data sets as arrays and their sampler, the inputs' facts (for
    the ranks' check), the restored state and position, the model's structure (for the job
    check; a resume compared it with the checkpoint's)."""

    train: Arrays
    test: Arrays | None
    sampler: GlobalBatchSampler
    data: dict[str, Any]
    state: Any
    pos: Position
    layers: Any


def start_fit(trainer: Trainer, train: Any, test: Any, resume: Any) -> FitStart:
    """Before ``trainer``'s sync's setup: take the data sets (refusing NaN and infinity where
    the network checks its feeds), sample them, open the checkpoints, take the parameters to
    train and lay them out (``trainer._layout``); see the module docstring."""
    train, test = as_arrays(train), (as_arrays(test) if test is not None else None)
    if trainer.network.check_finite:  # named before a step, by its rows
        refuse_not_finite(train, test, trainer.dtype)  # maybe in this rank's data alone
    sync = trainer.sync
    sampler = GlobalBatchSampler(
        array_length(train),
        trainer.batch_size,
        sync.rank,
        sync.world_size,
        trainer.accumulate,
        trainer.seed,
    )
    if (too_large := sampler.larger_than_the_data()) and sync.is_chief:
        log.warning("%s", too_large)
    data = data_facts(train, test, trainer.dtype)  # the inputs as cast: what trains
    # every rank's model: the same, or stop; and the checkpoint's, or no resume
    layers = trainer.network.structure()
    state, pos = trainer.checkpoints.open(resume, data["train_data"], layers)
    trainer._take_trainable()
    trainer.network.zero_grad()  # what a step cut short left (a second Ctrl-C, an error)
    names = {p.name for p in trainer.params}  # another model's firing order is due anew
    trainer._layout = ParamLayout(trainer.trainable, trainer.sync, names)  # what the sync keeps
    return FitStart(train, test, sampler, data, state, pos, layers)
