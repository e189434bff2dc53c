"""A 100 000-row embedding table whose rows travel to and from the parameter server sparsely.

The same script runs alone, under ``mpiexec`` and under ``distconv-launch``; the runtime (rank,
world size, servers) comes from the environment those set::

    python examples/sparse_table.py --epochs 3
    distconv-launch local --workers 2 --servers 2 -- examples/sparse_table.py --epochs 3

Each example is an item id (popular items often, most rarely: a Zipf law over the table) and 8
dense features; the target is the item's own effect plus a smooth function of the features. The
model is a ``Mixed`` layer summing a ``TableProjection(100_000, 32, sparse=True)`` of the item and
a ``FullMatrixProjection`` of the features, then a fully connected layer and a mean-squared-error
loss. The table is marked sparse, so through parameter servers each step pulls, pushes and gets
back only the rows of the items in its batch, not the 100 000 x 32 table; the Trainer asks the
network which rows those are (``Network.rows_needed``) before every forward. Locally and under
MPI the flag changes nothing.
"""

from __future__ import annotations

import argparse

import numpy as np

import distconv.distributed as dist
from distconv import Network, Trainer
from distconv.init import set_seed
from distconv.layers import FullMatrixProjection, FullyConnected, Mixed, MSELoss, TableProjection
from distconv.optim import OPTIMIZERS
from distconv.script_flags import (
    add_run_flags,
    count,
    optimizer,
    positive_float,
    print_last_epoch,
    print_result,
    refusals,
)
from distconv.sync.mpi import MPISync

VOCAB, WIDTH, FEATURES = 100_000, 32, 8
TABLE = "mix.proj0.weight"


def build_model(vocab: int = VOCAB) -> Network:
    """``mix = tanh(T[item] + A x + c)``, ``out = W mix + d``, loss ``mean((out - target)^2)``."""
    net = Network()
    parts = [TableProjection(vocab, WIDTH, sparse=True), FullMatrixProjection(FEATURES, WIDTH)]
    net.add("mix", Mixed(parts, bias=True, act="tanh"), ["item", "x"])
    net.add("out", FullyConnected(WIDTH, 1), "mix")
    net.add("loss", MSELoss(), ["out", "target"])
    return net


def make_data(n: int, seed: int, vocab: int = VOCAB) -> dict[str, np.ndarray]:
    """``n`` examples; items follow a Zipf law, so popular rows recur across batches.

    The items' effects are fixed (seed 0) so that a training and a test set share them.
    """
    effect = np.random.default_rng(0).standard_normal(vocab) * 0.5
    rng = np.random.default_rng(seed)
    item = (rng.zipf(1.3, n) - 1) % vocab
    x = rng.standard_normal((n, FEATURES))
    target = effect[item] + np.sin(x[:, 0] + 0.5 * x[:, 1])
    return {"item": item.astype(np.int64), "x": x.astype(np.float32), "target": target[:, None]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_run_flags(parser, epochs=3, batch_size=64)
    parser.add_argument(
        "--examples", type=count(1), default=8192, help="training examples (%(default)s)"
    )
    parser.add_argument(
        "--optimizer",
        type=optimizer,
        default="adam",
        help=f"one of {', '.join(sorted(OPTIMIZERS))} (%(default)s)",
    )
    parser.add_argument(
        "--lr", type=positive_float, default=0.01, help="learning rate (%(default)s)"
    )
    args = parser.parse_args()

    sync = dist.init(args.optimizer, lr=args.lr)  # rank, world size, transport: environment
    set_seed(0)
    with refusals(parser):  # a run already in --out and no --resume: one line, not a traceback
        try:
            trainer = Trainer(
                build_model(), sync, args.batch_size, out_dir=args.out, progress=False
            )
            trainer.fit(
                make_data(args.examples, seed=1), make_data(2048, seed=2), args.epochs,
                resume=args.resume,
            )  # fmt: skip
            moved = sync.traffic()
        finally:
            sync.close()
    last = print_last_epoch(trainer, args.out) if sync.is_chief else None
    if last is not None and moved:
        total = moved.get("bytes_pushed", 0) + moved.get("bytes_pulled", 0)
        table = VOCAB * WIDTH * 4
        steps = -(-args.examples // last["global_batch"])  # a short last batch is a step
        # through servers only the batches' rows travel, after rank 0 has seeded the shards
        # with every parameter (the table once); MPI reduces the whole table a step and
        # counts its gradient collectives only (wire_bytes), nothing at start-up
        start = (
            "steps" if isinstance(sync, MPISync)
            else f"steps, start-up included (rank 0 seeds the servers with the {table}-byte "
            "table once)"
        )  # fmt: skip
        print_result(
            f"bytes moved by rank 0: {total:.0f} in {len(trainer.history)} epoch(s) of {steps} "
            f"{start}; a dense table moves {2 * table} a step",
            bytes_moved=int(total),
        )


if __name__ == "__main__":
    dist.run_main(main)  # exit 75 where another rank's failure stopped this one
