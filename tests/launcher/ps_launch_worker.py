"""A user program for ``distconv-launch local --servers M``: a small LeNet through PServerSync.

``python ps_launch_worker.py OUT STEPS``: every rank and shard address comes from the runtime
(the launcher's variables); rank r trains on examples r, r+N, ... of each global batch of 8 and
writes its final weights to OUT/weights-<rank>.npz.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.init import set_seed
from distconv.logs import configure_logging
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.runtime import Runtime, detect_runtime
from distconv.sync import create_sync
from distconv.sync.base import SyncStrategy

BATCH = 8


def small_net():
    set_seed(0)
    net = lenet((1, 8, 8), 4, channels=(2, 3), hidden=8)
    for p in net.parameters():
        p.cast(np.float64)
    return net


def global_batches(steps: int):
    rng = np.random.default_rng(5)
    return [
        (rng.standard_normal((BATCH, 1, 8, 8)), rng.integers(0, 4, size=BATCH))
        for _ in range(steps)
    ]


def train(net, sync, steps: int, rank: int, world: int) -> None:
    """Drive the sync contract as the Trainer does, on this rank's strided shard."""
    for x, y in global_batches(steps):
        xs, ys = x[rank::world], y[rank::world]
        sync.start_step(len(ys))
        net.forward({"image": Arg(xs, needs_grad=False), "label": Arg(ids=ys, needs_grad=False)})
        net.backward(sync, loss="loss", loss_scale=len(ys))
        sync.finish_step()


def launched_sync(runtime: Runtime, **options: Any) -> SyncStrategy:
    """A PServerSync (SGD, lr 0.05) for the rank, shards and keys ``runtime`` reads from the
    launcher's environment, with ``options`` (``timeout=``) besides."""
    return create_sync(
        "pserver",
        optimizer=create_optimizer("sgd", lr=0.05),
        rank=runtime.rank,
        world_size=runtime.world_size,
        pservers=runtime.pservers,
        keys_dir=runtime.keys_dir,
        job_id=runtime.job_id,
        **options,
    )


def main(out: str, steps: str) -> None:
    runtime = detect_runtime()
    configure_logging(runtime)
    net = small_net()
    sync = launched_sync(runtime)
    try:
        sync.setup(net.parameters(), {"batch": BATCH})
        train(net, sync, int(steps), runtime.rank, runtime.world_size)
    finally:
        sync.close()
    weights = {p.name: p.value for p in net.parameters()}
    np.savez(Path(out) / f"weights-{runtime.rank}.npz", **weights)


if __name__ == "__main__":
    main(*sys.argv[1:])
