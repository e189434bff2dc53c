"""A pass that has no rows on this rank still hands every gradient to the sync.

A rank whose share of a step is empty (the uneven last step of an epoch, or a share of sequences
that are all empty) runs no forward and no backward, so no layer fires its parameters. A
synchronous parameter server still waits for this worker's push of every parameter, so it must
hand each of them over, zero or what its earlier passes accumulated (``MPISync`` exchanges which
parameters each rank fired and needs no push, but takes one alike). The Trainer does it with
:func:`fire_every_gradient`; so does a training loop of one's own (docs/architecture.md, "One
global batch").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import distconv  # annotations name types through it: get_type_hints imports them then
from distconv.network import Network
from distconv.parameter import Parameter

if TYPE_CHECKING:
    import distconv.sync


def fire_every_gradient(
    sync: distconv.sync.SyncStrategy, network: Network, params: Sequence[Parameter] | None = None
) -> None:
    """Hand every trainable gradient to ``sync.on_gradient``, as a backward would have.

    Call it on the last pass of a step in place of ``network.backward(sync)`` when this rank's
    share of that pass is empty (after ``sync.start_step``, before ``sync.finish_step``). Each
    gradient goes over as it stands: zero, or the sum earlier passes accumulated into it.

    The order is the sync's recorded firing order, else the network's (an earlier pass of the
    first step), then the parameters neither names (none before a first backward, or unfrozen
    since) in reverse order, as a backward through a chain of layers fires them: a sync told no
    order lays out by rank 0's first firing (``MPISync``), so where rank 0's share of the first
    step is empty, by this one, and as a backward would, not from the input layer on.

    Args:
        sync: the strategy the step was started on.
        network: the model whose parameters are handed over.
        params: the parameters to hand over; None: the network's that are not frozen
            (``static``). A frozen parameter is never handed over.
    """
    if params is None:
        params = network.parameters()
    by_name = {p.name: p for p in params if not p.static}
    recorded = network.firing_order or ()
    for name in dict.fromkeys([*sync.firing_order, *recorded, *reversed(by_name)]):
        if name in by_name:  # on_gradient, as backward is handed: not an override of __call__
            sync.on_gradient(by_name[name])
