"""A 100 000-row embedding table whose rows travel to and from the parameter server sparsely.

The same script runs alone, under ``mpiexec`` and under ``distconv-launch``; the runtime (rank,
world size, servers) comes from the environment those set::

    python examples/sparse_table.py --epochs 3
    distconv-launch local --workers 2 --servers 2 -- examples/sparse_table.py --epochs 3

Each example is an item id (popular items often, most rarely: a Zipf law over the table) and 8
dense features; the target is the item's own effect plus a smooth function of the features. The
model is a ``Mixed`` layer summing a ``TableProjection(100_000, 32, sparse=True)`` of the item and
a ``FullMatrixProjection`` of the features, then a fully connected layer and a mean-squared-error
loss. The table is marked sparse, so through parameter servers each step pulls and pushes only
the rows of the items in its batch, not the 100 000 x 32 table, and gets back those rows (rank 0,
which writes the checkpoints, every worker's; the others pull the table whole at each epoch's
end); the Trainer asks the network which rows those are (``Network.rows_needed``) before every
forward. The bytes line counts rank 0's. Locally and under
MPI the flag changes nothing.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

import numpy as np

import distconv.distributed as dist
from distconv import Network, Trainer
from distconv.init import set_seed
from distconv.layers import FullMatrixProjection, FullyConnected, Mixed, MSELoss, TableProjection
from distconv.optim import OPTIMIZERS
from distconv.script_flags import (
    add_accumulate_flag,
    add_dtype_flag,
    add_run_flags,
    count,
    optimizer,
    positive_float,
    print_last_epoch,
    print_result,
    refusals,
)
from distconv.service import ServiceEndpoints
from distconv.sync.base import SyncStrategy
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


class StepBytes(ServiceEndpoints):
    """A monitor, never served, that counts the bytes ``sync`` moves in the training steps
    alone. The Trainer tells its monitor when a fit's setup is done (``set_ready``), after each
    step (``observe_step``, then ``record_totals``) and after each epoch's end (``record_totals``,
    once its async refresh, evaluation and checkpoint are done), so what moves outside the
    steps (rank 0 seeding the servers, the test set's rows, a checkpoint's optimizer state, an
    async epoch end's pull of the whole table) is left out of :attr:`bytes`."""

    def __init__(self, sync: SyncStrategy) -> None:
        super().__init__("worker", sync.rank)
        self.sync = sync
        self.bytes = 0  # moved in the steps
        self._since = 0  # the sync's total when the step under way began

    def set_ready(self, ready: bool = True) -> None:
        super().set_ready(ready)
        self._since = moved(self.sync.traffic())

    def observe_step(self, seconds: float, samples: int, step: int | None = None) -> None:
        super().observe_step(seconds, samples, step)
        now = moved(self.sync.traffic())
        self.bytes += now - self._since
        self._since = now

    def record_totals(self, totals: Mapping[str, float], source: object = None) -> None:
        super().record_totals(totals, source)
        self._since = moved(totals)  # at an epoch's end: its refresh and checkpoint left out


def moved(totals: Mapping[str, float]) -> int:
    """The bytes a sync's ``traffic()`` says it pushed and pulled."""
    return int(totals.get("bytes_pushed", 0) + totals.get("bytes_pulled", 0))


def bytes_line(
    sync: SyncStrategy,
    steps: StepBytes,
    totals: Mapping[str, float],
    table: int,
    epochs: int,
    per_epoch: int,
) -> str:
    """The closing line: the bytes rank 0 moved in its steps (``epochs`` of ``per_epoch``
    steps), and through servers in all (``totals``, the sync's ``traffic()`` at the end), set
    against the ``table`` bytes of the table (its dtype's: ``--dtype``)."""
    line = (
        f"bytes moved by rank 0: {steps.bytes} in {epochs} epoch(s) of {per_epoch} steps; "
        f"a dense table moves {2 * table} a step"
    )
    if isinstance(sync, MPISync):  # it counts its gradient collectives alone (wire_bytes)
        return line
    # through servers only the batches' rows travel in a step; around the steps the whole
    # table may: rank 0 seeds the servers with it, a checkpoint gathers its optimizer state
    # (Adam: twice the table), an async epoch end pulls it
    return (
        f"{line}; {moved(totals)} in all, with start-up (rank 0 seeds the servers with "
        f"the {table}-byte table once), the test set's rows, each checkpoint's optimizer state "
        "and, in async mode, each epoch end's pull of the whole table"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    add_run_flags(parser, epochs=3, batch_size=64)
    add_accumulate_flag(parser)  # distconv train's: a larger global batch, a check in float64
    add_dtype_flag(parser)
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
    steps = StepBytes(sync)
    with refusals(parser):  # a run already in --out and no --resume: one line, not a traceback
        try:
            trainer = Trainer(
                build_model(), sync, args.batch_size, accumulate=args.accumulate,
                dtype=args.dtype, out_dir=args.out, progress=False, monitor=steps,
            )  # fmt: skip
            trainer.fit(
                make_data(args.examples, seed=1), make_data(2048, seed=2), args.epochs,
                resume=args.resume,
            )  # fmt: skip
            totals = sync.traffic()
        finally:
            sync.close()
    last = print_last_epoch(trainer, args.out) if sync.is_chief else None
    if last is not None and totals:
        per_epoch = -(-args.examples // last["global_batch"])  # a short last batch is a step
        table = next(p for p in trainer.params if p.name == TABLE).value.nbytes
        line = bytes_line(sync, steps, totals, table, len(trainer.history), per_epoch)
        print_result(line, bytes_moved=steps.bytes, bytes_in_all=moved(totals))


if __name__ == "__main__":
    dist.run_main(main)  # exit 75 where another rank's failure stopped this one
