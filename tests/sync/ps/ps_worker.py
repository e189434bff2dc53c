"""A real worker process for the parameter-server tests: trains the small net, prints each step.

Usage: ``python ps_worker.py ENDPOINTS RANK WORLD STEPS OPTIMIZER KEYS|- TIMEOUT OUT``; writes
the final weights to OUT (a .npz of plain arrays) unless killed first. Prints ``ready`` once
imported, before it connects.
"""

from __future__ import annotations

import sys

import numpy as np
from ps_helpers import batches, small_net, train_steps

from distconv.optim import create_optimizer
from distconv.sync.ps.client import PServerSync


def main(argv: list[str]) -> None:
    print("ready", flush=True)  # imported: a test may start its other ranks now
    endpoints, rank, world, steps, optimizer, keys, timeout, out = argv
    rank, world, steps = int(rank), int(world), int(steps)
    net = small_net(seed=rank)
    security = {"insecure": True} if keys == "-" else {"keys_dir": keys}
    sync = PServerSync(
        create_optimizer(optimizer, lr=0.05), rank=rank, world_size=world,
        pservers=endpoints.split(","), timeout=float(timeout), block_bytes=64, **security,
    )  # fmt: skip
    try:
        sync.setup(net.parameters(), {"batch": 8})
        for step, batch in enumerate(batches(steps, 8)):
            train_steps(net, sync, [batch], rank, world)
            print(f"step {step + 1}", flush=True)
        np.savez(out, **{p.name: p.value for p in net.parameters()})
    finally:
        sync.close()


if __name__ == "__main__":
    main(sys.argv[1:])
