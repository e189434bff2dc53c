"""mpiexec -n 2 python -m mpi4py run_layer_mistakes.py OUT MISTAKE [--overlap 0|1]: train
``tests/layer_mistakes.py``'s network, with ``MISTAKE`` ("none": a correct layer) in its layer
of one's own, through MPISync.

Each rank writes ``OUT/rank<r>.json``: the error the training raised (its class and message),
or none, and ``OUT/rank<r>.npz``: the weights after it. Buckets of 16 bytes: each gradient
goes on the wire, and its thread reduces it, while the layers below still run backward.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from distconv.optim import create_optimizer
from distconv.sync.mpi import MPISync
from tests.layer_mistakes import build, train, weights


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("mistake")
    parser.add_argument("--overlap", type=int, choices=(0, 1), default=1)
    args = parser.parse_args()
    mistake = None if args.mistake == "none" else args.mistake
    sync = MPISync(create_optimizer("sgd", lr=0.1), bucket_bytes=16, overlap=bool(args.overlap))
    net = build(mistake)
    error = None
    try:
        sync.setup(net.parameters(), {})
        try:
            train(net, sync, sync.rank, sync.world_size)
        except Exception as exc:  # the test reads it: every rank raises alike, none waits
            error = {"class": type(exc).__name__, "message": str(exc)}
        (args.out / f"rank{sync.rank}.json").write_text(json.dumps(error))
        np.savez(args.out / f"rank{sync.rank}.npz", **weights(net))
        if error is not None:  # a setup ends the abandoned step: the job closes cleanly
            for p in net.parameters():  # (one the layer replaced by another shape too)
                p.grad = np.zeros_like(p.value)
            sync.setup(net.parameters(), {})
    finally:
        sync.close()


if __name__ == "__main__":
    main()
