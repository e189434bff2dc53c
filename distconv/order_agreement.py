"""Where the ranks agree on the order the parameters fire in: the one a sync is told.

A sync that lays its gradients out by the firing order (``MPISync``'s buckets:
``lays_out_by_order``) is told it after a model's first step (``set_firing_order``), and every
rank must lay out alike. A rank knows the order from its network once it ran a backward; one
whose share of that step was empty (a sequence set's sentences all empty there, or none left to
it) ran none and handed its gradients over by :func:`~distconv.empty_pass.fire_every_gradient`.
So the ranks sum what they know (:func:`agreed_firing_order`): every rank then tells the sync
the backward's order, whichever ranks ran one, and a loop of one's own can tell it the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from distconv.sync import SyncStrategy
from distconv.sync.collective_time import timed_collective


def lays_out_by_order(sync: SyncStrategy) -> bool:
    """Whether ``sync`` lays its gradients out by the order it is told, so that every rank
    must be told the same: a class attribute ``lays_out_by_order = True`` says so (MPISync's;
    a strategy of one's own may set it), none that it does not."""
    return bool(getattr(sync, "lays_out_by_order", False))


def agreed_firing_order(
    sync: SyncStrategy, order: Sequence[str] | None, names: Sequence[str]
) -> list[str] | None:
    """The order the ranks that ran a backward fired ``names`` in, alike on every rank, or None
    where none ran one: for a sync that lays its gradients out by it (:func:`lays_out_by_order`),
    a collective between steps that every rank calls alike; for another, this rank's ``order``
    (None where empty), with no message, as in one process.

    Each rank adds each name's position in its ``order`` (nothing where it has none); the names
    sorted by their sums are that order where every rank that ran a backward of one model
    recorded it alike, and one order, the same on every rank, where they differ (the Network
    refuses a pass of another order than its own first, not another rank's). One
    ``allreduce_sum`` of ``len(names) + 1`` numbers; its wait is counted as the Trainer's
    (:func:`~distconv.sync.collective_time.timed_collective`).

    Args:
        sync: the strategy set up on every rank.
        order: this rank's recorded order (``Network.firing_order``); None or empty where it
            ran no backward.
        names: the trainable parameters' names, alike on every rank; a name ``order`` lacks
            goes after those it holds.
    """
    order = list(order or ())
    if sync.world_size == 1 or not lays_out_by_order(sync):  # each rank's own: none lays out
        return order or None
    place = {name: i for i, name in enumerate(order)}
    told = [float(bool(order)), *(float(place.get(n, len(order))) for n in names)]
    summed = timed_collective(sync, sync.allreduce_sum, told)
    if not summed[0]:
        return None
    return [names[i] for i in sorted(range(len(names)), key=lambda i: (summed[i + 1], i))]
