"""A user program for ``distconv-launch local --workers 2 --servers 1``: the small LeNet of
``ps_launch_worker.py`` through PServerSync with ``timeout=1`` (its shards keep their own 60 s:
the launcher passes ``--timeout`` to ``distconv train``'s alone), training step after step
until stopped, each step a line ``epoch 1/1 step N``.

``python own_program_timeout.py train``: every rank and shard address comes from the runtime;
the ``train`` argument, unused, is what :func:`tests.launcher.stopped_child.child_pid` finds a
worker's process by."""

from __future__ import annotations

import itertools

import numpy as np

from distconv.arg import Arg
from distconv.logs import configure_logging
from distconv.runtime import detect_runtime
from tests.launcher.ps_launch_worker import BATCH, launched_sync, small_net

#: seconds the sync waits for a shard: a stopped peer is given up on at 1.5 s
TIMEOUT = 1.0


def main() -> None:
    runtime = detect_runtime()
    configure_logging(runtime)
    net = small_net()
    sync = launched_sync(runtime, timeout=TIMEOUT)
    rng = np.random.default_rng(runtime.rank)
    try:
        sync.setup(net.parameters(), {"batch": BATCH})
        for step in itertools.count(1):
            xs = rng.standard_normal((BATCH, 1, 8, 8))
            ys = rng.integers(0, 4, size=BATCH)
            sync.start_step(BATCH)
            batch = {"image": Arg(xs, needs_grad=False), "label": Arg(ids=ys, needs_grad=False)}
            net.forward(batch)
            net.backward(sync, loss="loss", loss_scale=BATCH)
            sync.finish_step()
            print(f"epoch 1/1 step {step}", flush=True)
    finally:
        sync.close()


if __name__ == "__main__":
    main()
