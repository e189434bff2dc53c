"""What :meth:`~distconv.trainer.Trainer.fit` does before its sync's setup, on this rank alone:
the data sets checked and sampled (a float feed wider than the parameters said, on the chief),
the inputs' facts, the checkpoint to resume from (the chief alone opens it; without an output
directory, the Trainer's position in memory: :mod:`~distconv.memory_resume`), the parameters to
train and their layout. An error there may be this rank's
alone (a checkpoint refused on the chief, NaN in its data), and the other ranks wait in their
setup for it: ``fit`` tells them (:func:`~distconv.sync.base.tell_setup_failed`) before
raising it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from distconv.backend import is_float_dtype
from distconv.data import Arrays, data_facts
from distconv.memory_resume import position_in_memory
from distconv.optim_base import Optimizer
from distconv.parameter import Parameter
from distconv.resume import Position, dtype_fact
from distconv.sampler import GlobalBatchSampler
from distconv.sequence_set import SequenceSet, arrays_of, as_data_set, counted, set_length
from distconv.step_guard import ParamLayout
from distconv.trainer_args import refuse_not_finite

if TYPE_CHECKING:
    from distconv.network import Network
    from distconv.trainer import Trainer

log = logging.getLogger("distconv.trainer")  # the warning fit said before


class FitStart(NamedTuple):
    """What fit goes on with: the data sets as arrays and their sampler, the inputs' facts (for
    the ranks' check), the restored state and position, the model's structure (for the job
    check; a resume compared it with the checkpoint's)."""

    train: Arrays | SequenceSet
    test: Arrays | SequenceSet | None
    sampler: GlobalBatchSampler
    data: dict[str, Any]
    state: Any
    pos: Position
    layers: Any


def start_fit(trainer: Trainer, train: Any, test: Any, resume: Any) -> FitStart:
    """Before ``trainer``'s sync's setup: take the data sets (refusing NaN and infinity where
    the network checks its feeds), sample them, open the checkpoints, take the parameters to
    train and lay them out (``trainer._layout``); see the module docstring."""
    refuse_recast(trainer)
    warn_of_hand_set_rate(trainer.sync.optimizer)
    network, loss = trainer.network, trainer.loss_name
    # a sequence set with what its loss averages over decided, for each step's count
    train = counted(network, loss, as_data_set(train))
    test = counted(network, loss, as_data_set(test)) if test is not None else None
    if trainer.network.check_finite:  # named before a step, by its rows
        # maybe in this rank's data alone
        refuse_not_finite(train, test, trainer.dtype)
    sync = trainer.sync
    sampler = GlobalBatchSampler(
        set_length(train),  # a sequence set's sequences
        trainer.batch_size,
        sync.rank,
        sync.world_size,
        trainer.accumulate,
        trainer.seed,
    )
    if (too_large := sampler.larger_than_the_data()) and sync.is_chief:
        log.warning("%s", too_large)
    if trainer.dtype is None and sync.is_chief:  # a dtype casts every float feed to it
        if wider := wider_feeds(trainer.network, trainer.params, arrays_of(train), arrays_of(test)):
            log.warning("%s", wider)
    data = data_facts(train, test, trainer.dtype)  # the inputs as cast: what trains
    # every rank's model: the same, or stop; and the checkpoint's, or no resume
    layers = trainer.network.structure()
    if (pos := position_in_memory(trainer, resume, data["train_data"])) is not None:
        state = None  # the sync's in memory, kept by its setup
    else:
        state, pos = trainer.checkpoints.open(resume, data["train_data"], layers)
    trainer._take_trainable()
    trainer.network.zero_grad()  # what a step cut short left (a second Ctrl-C, an error)
    names = {p.name for p in trainer.params}  # another model's firing order is due anew
    trainer._layout = ParamLayout(trainer.trainable, trainer.sync, names)  # what the sync keeps
    return FitStart(train, test, sampler, data, state, pos, layers)


def refuse_recast(trainer: Trainer) -> None:
    """Refuse a fit whose parameters are no longer in the float type ``trainer`` was made
    with, which its config and checkpoints record: a Trainer casts its network when it is
    made (``dtype=``), so another one made since on the same network recast what this one
    trains, and this one trained in that type while its checkpoints said its own.

    Raises:
        TypeError: naming both types, and the ways on.
    """
    made, now = trainer.config["dtype"], dtype_fact(trainer.params)
    if now == made:
        return
    asked = f'dtype="{trainer.dtype}"' if trainer.dtype is not None else "dtype=None"
    raise TypeError(
        f"Trainer({asked}).fit: the network's parameters are {now} now, not the {made} they "
        "were when this Trainer was made (what its config and checkpoints record): something "
        f'cast them since, such as another Trainer(dtype="{now}") made on the same network '
        "(a Trainer casts its network when it is made). Train with the Trainer made last, "
        f'make a new one (dtype="{now}"), or cast them back (p.cast("{made}") for each of '
        "network.parameters())"
    )


def warn_of_hand_set_rate(optimizer: Optimizer) -> None:
    """Warn, once at a fit's start, where ``optimizer.lr`` was assigned by hand since the
    schedule set it (:meth:`~distconv.optim_base.Optimizer.lr_set_by_hand`): each epoch's
    start sets it back to ``base_lr`` times the schedule's factor, so the fit would not train
    at it, and nothing said so (a notebook's ``optimizer.lr = 0.01`` between fits)."""
    if not optimizer.lr_set_by_hand():
        return
    log.warning(
        "optimizer.lr is %r, assigned by hand: each epoch's start sets it back to base_lr "
        "times the schedule's factor (%r x %r), so this fit does not train at %r. To change "
        "the rate between fits, call optimizer.set_base_lr(rate) (on every rank)",
        optimizer.lr,
        optimizer.base_lr,
        optimizer.lr_factor,
        optimizer.lr,
    )


def wider_feeds(
    network: Network, params: Sequence[Parameter], train: Arrays, test: Arrays | None
) -> str | None:
    """What to tell the user where a float feed of either set is wider than the parameters'
    float type (the widest, where they have several), fed as it is (``Trainer(dtype=None)``),
    or None: each layer computes in ``result_type(input, weight)``, so float64 images (``x /
    255.0`` of uint8) make a float32 model compute in float64 (a lenet's epoch took 40 %
    longer), without a word. Said, not cast: a cast would change, unasked, what a run fed
    float64 on purpose computes, and the data's fingerprint its checkpoints record, so a run
    started before could not be resumed. Integer feeds are ids."""
    floats = [p.value.dtype for p in params if is_float_dtype(p.value.dtype)]
    if not floats:
        return None
    model = np.result_type(*floats)
    weighted = _reaching_weights(network)
    wider = [
        (f"the {what} set's {name!r} ({a.dtype})", a.dtype)
        for what, arrays in [("training", train), ("test", test or {})]
        for name, a in arrays.items()
        if name in weighted and is_float_dtype(a.dtype) and _promoted(a.dtype, model) != model
    ]
    if not wider:
        return None
    widest = np.result_type(*(dtype for _, dtype in wider))
    names = [name for name, _ in wider]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    them, are, they = (
        ("it", "is", "it reaches") if len(names) == 1 else ("them", "are", "they reach")
    )
    cast = f"np.{model}" if hasattr(np, model.name) else f'"{model}"'  # ml_dtypes' bfloat16
    return (
        f"{listed} {are} wider than the model's {model} parameters: the layers {they} "
        f"compute in {widest}, slower than in {model} (the parameters stay {model}). Cast "
        f'{them} (x.astype({cast})), or pass Trainer(dtype="{model}") to cast each batch '
        f'(dtype="{widest}" trains in {widest} throughout)'
    )


def _reaching_weights(network: Network) -> set[str]:
    """The feeds of ``network`` from which a layer holding parameters is reached, through
    the layers that read them and those that read theirs."""
    readers: dict[str, list[str]] = {}
    for layer, inputs in network.wiring.items():
        for name in inputs:
            readers.setdefault(name, []).append(layer)
    found = set()
    for feed in network.feed_names:
        seen, waiting = set(), list(readers.get(feed, ()))
        while waiting:
            layer = waiting.pop()
            if layer in seen:
                continue
            if network[layer].parameters():
                found.add(feed)
                break
            seen.add(layer)
            waiting.extend(readers.get(layer, ()))
    return found


def _promoted(feed: Any, model: Any) -> Any:
    """The type a layer computes in from a ``feed`` under ``model`` weights; ``model`` where
    numpy promotes no such pair (an ml_dtypes type beside another): nothing to say."""
    try:
        return np.promote_types(feed, model)
    except TypeError:
        return model
