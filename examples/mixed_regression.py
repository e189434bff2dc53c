"""Train your own model through distconv's public API: a regression built from Paddle's layers.

The same script runs alone, under ``mpiexec`` and under ``distconv-launch``; the runtime (rank,
world size, servers) comes from the environment those set::

    python examples/mixed_regression.py --epochs 30
    mpiexec -n 2 python -m mpi4py examples/mixed_regression.py --epochs 30
    distconv-launch local --workers 2 --servers 1 -- examples/mixed_regression.py --epochs 30

The model is a ``Mixed`` layer summing two full-matrix projections of two inputs, then a fully
connected layer and a mean-squared-error loss. There are no labels and no accuracy: the Trainer
trains any network that ends in a loss.
"""

from __future__ import annotations

import argparse

import numpy as np

import distconv.distributed as dist
from distconv import Network, Trainer
from distconv.init import set_seed
from distconv.layers import FullMatrixProjection, FullyConnected, Mixed, MSELoss
from distconv.script_flags import add_run_flags, print_last_epoch, refusals


def build_model() -> Network:
    """``mix = tanh(A a + B b + c)``, ``out = W mix + d``, loss ``mean((out - target)^2)``."""
    net = Network()
    mix = Mixed([FullMatrixProjection(8, 32), FullMatrixProjection(4, 32)], bias=True, act="tanh")
    net.add("mix", mix, ["a", "b"])
    net.add("out", FullyConnected(32, 1), "mix")
    net.add("loss", MSELoss(), ["out", "target"])
    return net


def make_data(n: int, seed: int) -> dict[str, np.ndarray]:
    """A smooth function of two inputs, the same on every rank (the seed fixes it)."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((n, 8)), rng.standard_normal((n, 4))
    target = np.sin(a[:, :1] + 0.5 * b[:, 1:2]) + 0.1 * a[:, 2:3] * b[:, :1]
    return {"a": a.astype(np.float32), "b": b.astype(np.float32), "target": target}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    add_run_flags(parser, epochs=30, batch_size=32)
    args = parser.parse_args()

    sync = dist.init("adam", lr=0.01)  # rank, world size and transport from the environment
    set_seed(0)
    with refusals(parser):  # a run already in --out and no --resume: one line, not a traceback
        try:
            trainer = Trainer(
                build_model(), sync, args.batch_size, out_dir=args.out, progress=False
            )
            trainer.fit(
                make_data(2048, seed=1), make_data(512, seed=2), args.epochs, resume=args.resume
            )
        finally:
            sync.close()
    if sync.is_chief:  # the test loss, or that a resume found nothing left to train
        print_last_epoch(trainer, args.out)


if __name__ == "__main__":
    dist.run_main(main)  # exit 75 where another rank's failure stopped this one
