"""One optimizer step of :class:`~distconv.trainer.Trainer`: this rank's passes forward and
backward, the last handing each gradient to the sync, then the sync's ``finish_step``; and
what a step cut short (an error, a second Ctrl-C) leaves the sync to let go of.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from distconv.empty_pass import fire_every_gradient
from distconv.layers.randomness import training_step
from distconv.parameter import keep_gradient
from distconv.sequence_set import SequenceSet, count_of

if TYPE_CHECKING:
    from distconv.data import Arrays
    from distconv.trainer import Trainer

log = logging.getLogger("distconv.trainer")


def train_step(
    trainer: Trainer, arrays: Arrays | SequenceSet, passes: list[np.ndarray]
) -> tuple[Any, Any, int]:
    """:meth:`~distconv.trainer.Trainer.train_step`: one step of ``trainer`` over this rank's
    ``passes``; returns (loss sum, right answers, examples)."""
    t, sync = trainer, trainer.sync
    counts = [count_of(arrays, i) for i in passes]
    examples = sum(counts)
    began = time.perf_counter()
    sync.start_at(t.pos.step)  # the run's numbers: a resume's, past a skipped step
    sync.start_step(examples)
    try:
        loss_sum, correct = _passes(t, arrays, passes, counts)
        sync.finish_step()
    except BaseException as error:  # the sync lets go of the step, then the error goes on
        sync.abandon_step()
        say_applied_in_part(t, "the fit stopped with")
        t._layout.blame(sync, error)  # a weight the sync reshaped, not its layer
        raise
    t.pos.step += 1  # (a second Ctrl-C held over the updates is raised once it is counted:
    # :func:`~distconv.held_updates.counting_step`, around the fit's steps)
    if t._layout.order_due:  # this model's first step: its order, agreed by the ranks
        t._layout.first_step(sync, t.network.firing_order)
    if t.monitor is not None:
        t.monitor.observe_step(time.perf_counter() - began, examples, t.pos.step)
        t.monitor.record_totals(sync.traffic(), sync)
    return loss_sum, correct, examples


def say_applied_in_part(trainer: Trainer, now: str) -> None:
    """Say, in one line, that ``trainer``'s parameters hold a step applied in part (its
    sync's ``applied_in_part``: LocalSync's and MPISync's), where they do; ``now``: what
    happens with them (``the fit stopped with``, ``evaluate() scores``). A second Ctrl-C is
    held over a step's updates, but an error, a third Ctrl-C or an interrupt raised elsewhere
    (a layer's own) between two of them leaves the weights in no step: evaluated and trained
    on from without a word, they gave numbers that belong to no run."""
    part = trainer.sync.applied_in_part
    if part is None:
        return
    log.error(
        "%s step %d applied in part (%s): the weights belong to no step; fit(resume=True) "
        "goes on from the last checkpoint (with out_dir), or initialise the model again; "
        "a fit from these weights trains on from them",
        now,
        trainer.pos.step + 1,
        part,
    )


def _passes(
    t: Trainer, arrays: Arrays | SequenceSet, passes: list[np.ndarray], counts: list[int]
) -> tuple[Any, Any]:
    """Forward and backward each pass; the last hands the gradients to the sync."""
    loss_sum, correct = 0, 0
    for k, index in enumerate(passes):
        last = k == len(passes) - 1
        if counts[k] == 0:  # a short last step left this rank nothing, or empty sequences
            if last:  # a parameter server waits for each of its gradients
                fire_every_gradient(t.sync, t.network, t.trainable)
            continue
        # a dropout's mask of this rank, step and pass, drawn again alike by a resumed run
        with training_step(t.seed, t.sync.rank, t.pos.step, k):
            loss, right = t._forward(arrays, index)
        # the bound method, not the sync: one Python call less for each gradient
        callback = t.sync.on_gradient if last else keep_gradient
        t.network.backward(callback, loss=t.loss_name, loss_scale=counts[k])
        loss_sum, correct = loss_sum + loss, correct + right
    return loss_sum, correct
