"""mpiexec -n 2 python -m mpi4py run_frozen_unfrozen.py OUT OVERLAP: the small float64 LeNet
with Adam, ``conv1`` frozen for steps 1 and 2 and trained again from step 3 (the firing order
reset each time, as the Network's error asks), each rank on its half of every global batch.
Each rank saves its values to ``OUT/values<rank>.npz``; a rank that fails writes its error to
``OUT/rank<r>.err`` first. :func:`train_frozen` is the same training for one process."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from distconv.backend import to_device
from distconv.optim import create_optimizer
from distconv.sync.base import SyncStrategy
from tests.mpi.common import global_batches, one_step, recorded, small_lenet, weights

#: the steps (of :data:`~tests.mpi.common.GLOBAL_BATCHES`) during which conv1 is frozen
FROZEN_STEPS = (1, 2)


def train_frozen(sync: SyncStrategy, rank: int = 0, world: int = 1) -> dict[str, np.ndarray]:
    """Train with ``sync`` (set up here), conv1 frozen for :data:`FROZEN_STEPS`; the values."""
    net = small_lenet(seed=3)
    sync.setup(net.parameters(), {})
    conv1 = [p for p in net.parameters() if p.name.startswith("conv1.")]
    for step, (x, y) in enumerate(global_batches()):
        frozen = step in FROZEN_STEPS
        if frozen != conv1[0].static:
            for p in conv1:
                p.set_static(frozen)
            net.reset_firing_order()
        one_step(net, sync, to_device(x[rank::world]), to_device(y[rank::world]))
    return weights(net)


def main() -> None:
    from distconv.sync.mpi import MPISync

    out, overlap = Path(sys.argv[1]), sys.argv[2] == "1"
    sync = MPISync(create_optimizer("adam", lr=0.01), overlap=overlap, bucket_bytes=256)
    with recorded(sync, out):
        values = train_frozen(sync, sync.rank, sync.world_size)
    np.savez(out / f"values{sync.rank}.npz", **values)


if __name__ == "__main__":
    main()
