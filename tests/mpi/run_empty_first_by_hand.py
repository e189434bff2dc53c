"""mpiexec -n 2 python -m mpi4py run_empty_first_by_hand.py OUT TABLES [agreed]: a loop of one's
own over MPI, one epoch of :data:`~tests.sequence_tagger.RANK0_EMPTY_FIRST`'s sentences, 2 a rank
a step: rank 0's share of the first step is only empty sentences, so it hands every gradient
over with ``fire_every_gradient``, without a backward, while rank 1 runs one (and in the
second step the other way round).

The tagger embeds with ``TABLES`` tables; the sync makes a bucket of each parameter. Without
``agreed`` the loop tells the sync no order (it lays out by rank 0's first firing); with it,
every rank tells it the order agreed after the first step
(:func:`~distconv.order_agreement.agreed_firing_order`). Rank 0 saves the parameters to
``OUT`` (.npz); each rank saves its buckets and firing order
(:func:`~tests.mpi.common.save_layout`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from distconv.empty_pass import fire_every_gradient
from distconv.equivalence import weights
from distconv.optim import create_optimizer
from distconv.order_agreement import agreed_firing_order
from distconv.sampler import GlobalBatchSampler
from distconv.sequence_set import count_of
from distconv.sync.mpi import MPISync
from tests.mpi.common import save_layout
from tests.sequence_tagger import OPTIMIZER, RANK0_EMPTY_FIRST, lengths_in_order, tagged_set, tagger


def main() -> None:
    out, tables, agreed = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:] == ["agreed"]
    data = tagged_set(lengths_in_order(RANK0_EMPTY_FIRST))
    net = tagger(tables=tables)
    sync = MPISync(create_optimizer(**OPTIMIZER), bucket_bytes=8)  # one a bucket
    try:
        sync.setup(net.parameters())
        sampler = GlobalBatchSampler(len(data), 2, sync.rank, sync.world_size, 1, 0)
        for step, (index,) in enumerate(sampler.passes(0)):
            count = count_of(data, index)  # the tokens: no step of this epoch has none at all
            sync.start_step(count)
            if count:
                net.forward(data.feeds(index))
                net.backward(sync.on_gradient, loss="loss", loss_scale=count)
            else:  # no forward (an empty batch has no mean loss), and still every gradient
                fire_every_gradient(sync, net)
            sync.finish_step()
            if agreed and step == 0:  # every rank alike, rank 0 with no order of its own
                names = [p.name for p in net.parameters()]
                sync.set_firing_order(agreed_firing_order(sync, net.firing_order, names))
        save_layout(out, sync, net)
    finally:
        sync.close()
    if sync.rank == 0:
        np.savez(out, **weights(net))


if __name__ == "__main__":
    main()
