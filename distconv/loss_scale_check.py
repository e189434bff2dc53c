"""The warning for a mean loss handed to a sync without its count as ``loss_scale``.

A sync strategy takes gradient *sums* over this rank's examples and divides them by the step's
global count (``start_step``). A loss that is a mean over its rows, seeded with the default
``loss_scale`` of 1, hands over that mean instead: every transport then divides it by the count
again, and the model trains at ``1/batch`` of its learning rate, which looks like slow training,
not like a mistake. :meth:`distconv.network.Network.backward` calls :func:`warn_unscaled_mean`
after a pass, which warns once per network where all of these hold:

- the callback is a sync (a :class:`~distconv.sync.base.SyncStrategy`, or its bound
  ``on_gradient``) in a step of more than one example (``start_step(n)``, ``n > 1``; a loop
  that tells it 1 per step and seeds 1 averages the ranks' means, consistently);
- ``loss_scale`` is 1;
- the loss layer takes a mean (:func:`takes_mean`) over more than one row.

A loss of one's own that sums its rows is not a mean, and is not warned of: only the library's
mean losses (``SoftmaxCrossEntropy``, ``MSELoss``) and a layer whose class sets ``mean_loss =
True`` are; ``mean_loss = False`` silences it for a subclass that sums.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

from distconv.fired_writes import strategy_of
from distconv.layers.base import Layer
from distconv.layers.loss import MSELoss, SoftmaxCrossEntropy

#: the library's losses whose output is the mean over their rows (their docstrings say so)
MEAN_LOSSES = (SoftmaxCrossEntropy, MSELoss)

#: the networks warned already: once each, not once a step
_warned: weakref.WeakSet[Any] = weakref.WeakSet()


def takes_mean(layer: Layer) -> bool:
    """Whether ``layer``'s output is a mean over its input's rows: its class's ``mean_loss``
    where it sets one, else whether it is one of :data:`MEAN_LOSSES`."""
    return bool(getattr(layer, "mean_loss", isinstance(layer, MEAN_LOSSES)))


def sync_of(callback: Any) -> Any | None:
    """The sync behind ``callback``: the sync itself, or the object of its bound method
    (``sync.on_gradient``, which the Trainer hands over); None for a plain callback.

    A sync is known by the contract's ``step_examples`` property, not by its class: this tier
    (the network's) imports nothing of ``distconv.sync``, which builds on it.
    """
    owner = strategy_of(callback)
    return owner if isinstance(getattr(type(owner), "step_examples", None), property) else None


def step_count(sync: Any) -> int | None:
    """The examples ``sync`` was told at ``start_step``, or None where it cannot say: whatever
    reading it raises (a SyncError before any ``start_step``, a strategy of one's own) is the
    sync's to say, not this warning's, and the pass has run."""
    try:
        return int(sync.step_examples)
    except Exception:
        return None


def warn_unscaled_mean(network: Any, callback: Any, loss: Layer, loss_scale: float) -> None:
    """Warn, once for ``network``, where its pass seeded the mean ``loss`` with 1 for a sync
    that will divide the gradients by the step's count (this module's docstring: when).

    ``stacklevel`` names the caller of ``Network.backward``.
    """
    if loss_scale != 1:  # the Trainer's and a right loop's pass: one comparison, nothing more
        return
    sync = sync_of(callback)
    examples = None if sync is None else step_count(sync)
    if examples is None or examples < 2 or not loss.inputs or network in _warned:
        return
    rows = loss.inputs[0].batch_size
    if rows < 2 or not takes_mean(loss):
        return
    _warned.add(network)
    named = type(sync).__name__ + ("" if sync is callback else f".{callback.__name__}")
    warnings.warn(
        f"backward({named}) seeded the loss {loss.label}, a mean over "
        f"{rows} rows, with loss_scale=1, in a step of {examples} examples: the sync divides "
        f"the gradient sums by the step's examples, so it takes a gradient {rows} times too "
        f"small (with SGD, a step of 1/{rows} of its size); pass backward(sync, "
        f"loss_scale={rows}), the rows the loss averages over, as the Trainer does",
        UserWarning,
        stacklevel=3,
    )
