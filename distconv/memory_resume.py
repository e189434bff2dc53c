"""A fit without an output directory goes on from where the Trainer's last fit stopped, in
memory, as one with a directory goes on from its last checkpoint.

Without ``out_dir`` nothing is saved, yet the Trainer holds all a checkpoint would restore:
the weights and the sync's optimizer state, which a second fit trains on from anyway, and its
position (epoch, step, the stopped epoch's metric sums). A second ``fit`` took the first two
and dropped the third: it trained ``epochs`` more epochs from the trained weights, with the
epoch numbers, learning-rate schedule, shuffle order and dropout masks of a fresh run, which
is neither a continuation nor a fresh start. So ``resume=True`` or ``"auto"`` continues from
the position in memory (``fit(1)`` then ``fit(2, resume=True)`` ends with the weights of one
``fit(2)``, bit for bit), and ``resume=False`` starts the epochs again from the trained
weights, as asked, with a warning, once a Trainer: it is rarely what a notebook's second cell
means.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from distconv.resume import CheckpointError, Position

if TYPE_CHECKING:
    from distconv.trainer import Trainer

log = logging.getLogger("distconv.trainer")


def position_in_memory(
    trainer: Trainer, resume: Any, train_data: Mapping[str, Any]
) -> Position | None:
    """Where ``trainer``'s fit starts without an output directory: a copy of its position
    where ``resume`` is True or ``"auto"`` and it has trained; None where the checkpoints
    decide (an output directory, or nothing trained yet: ``resume=True`` is refused there as
    with no checkpoint to resume). ``resume=False`` (or ``"overwrite"``) on a trained Trainer
    starts afresh, said once a Trainer.

    Raises:
        CheckpointError: ``train_data`` (the training set's fingerprint) is not that of the
            set the position was trained on, as a checkpoint's resume refuses it: its batch
            order is another, and a step past the new set's epoch trained nothing."""
    pos = trainer.pos
    if trainer.out_dir is not None or not (pos.epoch or pos.step):
        return None
    if resume in (True, "auto"):
        refuse_other_data(trainer, resume, train_data)
        if pos.step_in_epoch and not pos.sums:
            _say_sums_lost(pos, resume)
        return Position(pos.epoch, pos.step, pos.step_in_epoch, dict(pos.sums))
    if not trainer._said_fresh_again:
        trainer._said_fresh_again = True
        log.warning(
            "fit(resume=%r) starts from epoch 1 again, with the weights and optimizer state "
            "this Trainer trained (to step %d): the learning-rate schedule, "
            "shuffle order and epoch numbers start again; fit(resume=True) continues where "
            "it stopped, and a model and sync made anew start fresh",
            resume,
            pos.step,
        )
    return None


def _say_sums_lost(pos: Position, resume: Any) -> None:
    """Warn that the epoch resumed at ``pos`` counts its metrics from there: the fit before
    ended in it by an error or a Ctrl-C, whose sums only one process keeps, and only where no
    step was cut between its updates and its loss's count
    (:func:`~distconv.epoch_run.sums_kept_at_an_error`)."""
    log.warning(
        "fit(resume=%r) goes on from step %d of epoch %d, whose metric sums of the steps "
        "before went with the fit that ended there by an error or a Ctrl-C (a stop keeps "
        "them; a sync with a transport, MPI or a parameter server, sums them only at a stop, "
        "and a step cut after its updates left its loss uncounted): that epoch's train_loss "
        "and train_acc count its steps from here on",
        resume,
        pos.step_in_epoch,
        pos.epoch + 1,
    )


def refuse_other_data(trainer: Trainer, resume: Any, train_data: Mapping[str, Any]) -> None:
    """Refuse to go on from ``trainer``'s position in memory on a training set other than the
    one it was trained on (``train_data``: this fit's fingerprint)."""
    was = trainer._position_data
    if was is None or dict(was) == dict(train_data):
        return
    sizes = f"{was.get('examples')} examples then, {train_data.get('examples')} now"
    raise CheckpointError(
        f"fit(resume={resume!r}) without out_dir goes on from this Trainer's position in "
        f"memory (step {trainer.pos.step}, epoch {trainer.pos.epoch + 1}), which it trained on "
        f"another training set ({sizes}; their fingerprints differ): its batch order would not "
        "go on. Pass the same training set, or resume=False to start the epochs again on this "
        "one from the trained weights"
    )
