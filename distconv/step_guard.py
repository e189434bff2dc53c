"""What a step's checkpoint is checked for before any part of it is written.

A step's checkpoint is several files (:class:`~distconv.resume.StepCheckpoints`): the chief's
part, then each parameter-server shard's. Parameters or state holding NaN or infinity, a step
or epoch that is no count and a seed that is no integer are refused here, before the step's
directory is made (its name is the step's digits); the chief's save then checks the state's
counts before any shard writes its part, so a refused checkpoint leaves no part of its step on
any disk.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from distconv.backend import get_array_module
from distconv.checkpoint import check_savable
from distconv.parameter import Parameter
from distconv.sync.local import not_numbers


class TrainingError(RuntimeError):
    """Training cannot go on (the loss diverged); the message names the epoch and steps."""


def check_step_checkpoint(
    params: Sequence[Parameter],
    state: Mapping[str, Any],
    *,
    step: Any,
    epoch: Any,
    seed: Any = None,
    where: str,
) -> None:
    """Refuse a checkpoint of ``params`` and optimizer ``state`` at ``step`` and ``epoch``
    before anything of it is written: a step, epoch or ``seed`` that the chief's save would
    refuse (first: the finite check's message adds 1 to the epoch), or values that are not
    finite.

    Args:
        where: the checkpoint as a refusal names it (``"of step 7 in /run/checkpoints"``).

    Raises:
        TrainingError: a parameter or its optimizer state holds NaN or infinity.
        CheckpointError: the step, epoch or seed is one that
            :func:`~distconv.checkpoint.save_checkpoint` refuses.
    """
    check_savable(where, step=step, epoch=epoch, seed=seed)
    _check_finite(params, state, step, epoch)


def _check_finite(
    params: Sequence[Parameter], state: Mapping[str, Any], step: Any, epoch: Any
) -> None:
    """Refuse a checkpoint of parameters, or of an optimizer state, holding NaN or inf."""
    where = f"at step {step} (epoch {epoch + 1}); no checkpoint was written over the"
    where += " last finite one"
    todo = "lower the learning rate, train in a wider dtype, or check the data"
    for p in params:
        if not _finite(p.value):
            raise TrainingError(f"parameter {p.name!r} holds NaN or infinity {where}; {todo}")
    for name, entries in state.items():
        for key, value in entries.items() if isinstance(entries, Mapping) else ():
            if not _finite(value):
                raise TrainingError(
                    f"optimizer state {key!r} of parameter {name!r} holds NaN or infinity "
                    f"{where} (an update overflowed it, as a gradient too large for the "
                    f"dtype does); {todo}"
                )


def _finite(a: Any) -> bool:
    """Whether the array (numpy or cupy) or number ``a`` holds no NaN nor infinity; True for
    what holds no numbers (``None``, a string), which ``save_checkpoint`` refuses by name."""
    return not_numbers(a) is not None or bool(get_array_module(a).isfinite(a).all())
