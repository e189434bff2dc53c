"""A real worker process that trains through ``Trainer.fit`` twice, told by its test when.

Usage: ``python fit_worker.py ENDPOINTS RANK WORLD OUT_DIR [SLOW_SECONDS [stop]]``: the small net
(each rank from its own seed: rank 0's values are what the shards get), SGD on the shards at
``ENDPOINTS`` (no CURVE, ``block_bytes=64``), batch 4 of 64 fixed examples. It prints ``ready``,
then ``fit1`` once a ``fit`` of one epoch returned (its weights in ``OUT_DIR/fit1-RANK.npz``),
reads a line, runs a second ``fit`` of no epoch (setup alone: what the shards start the next
epochs from), prints ``fit2``, reads a line and closes. ``SLOW_SECONDS`` delays each step of
this rank (its pushes then come last). ``stop``: rank 0 sends itself SIGTERM after its first
step, so the first ``fit`` ends in the ``Preempted`` every rank raises at the step they agree
on (a script that catches it goes on with the model that fit left; its message goes to
``OUT_DIR/stopped-RANK.txt``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
from ps_helpers import small_net

from distconv.optim import create_optimizer
from distconv.resume import Preempted
from distconv.sync.ps.client import PServerSync
from distconv.trainer import Trainer


class SlowSteps:
    """The Trainer's ``monitor``: sleeps ``seconds`` at every forward (so before each push)."""

    def __init__(self, seconds: float, sigterm: bool = False) -> None:
        self.seconds = seconds
        self.sigterm = sigterm  # once, after the first step: the Trainer's handler is in place

    def set_ready(self, ready: bool = True) -> None:
        """Nothing to tell."""

    def beat(self, step: int | None = None) -> None:
        time.sleep(self.seconds)

    def observe_step(self, seconds: float, samples: int, step: int | None = None) -> None:
        """Nothing to record; SIGTERM to this process after the first step if asked."""
        if self.sigterm:
            self.sigterm = False
            os.kill(os.getpid(), signal.SIGTERM)

    def record_totals(self, totals: object, source: object = None) -> None:
        """Nothing to record."""


def data() -> dict[str, np.ndarray]:
    """The 64 training examples every rank reads."""
    rng = np.random.default_rng(7)
    return {"image": rng.standard_normal((64, 1, 8, 8)), "label": rng.integers(0, 4, 64)}


def main(argv: list[str]) -> None:
    endpoints, rank, world, out, *slow = argv
    rank, world = int(rank), int(world)
    print("ready", flush=True)
    net = small_net(seed=rank)
    sync = PServerSync(
        create_optimizer("sgd", lr=0.2), rank=rank, world_size=world,
        pservers=endpoints.split(","), insecure=True, timeout=30, block_bytes=64,
    )  # fmt: skip
    stop = slow[1:] == ["stop"]
    monitor = SlowSteps(float(slow[0]), stop and rank == 0) if slow else None
    try:
        trainer = Trainer(net, sync, 4, progress=False, monitor=monitor)
        try:
            trainer.fit(data(), epochs=1)
        except Preempted as exc:
            if not stop:
                raise
            (Path(out) / f"stopped-{rank}.txt").write_text(str(exc))  # the test reads the step
        np.savez(Path(out) / f"fit1-{rank}.npz", **{p.name: p.value for p in net.parameters()})
        print("fit1", flush=True)
        sys.stdin.readline()
        trainer.fit(data(), epochs=0)  # the second fit's setup: the shards are seeded again
        print("fit2", flush=True)
        sys.stdin.readline()
    finally:
        sync.close()


if __name__ == "__main__":
    main(sys.argv[1:])
