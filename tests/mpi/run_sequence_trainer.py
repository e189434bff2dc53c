"""mpiexec -n 2 python -m mpi4py run_sequence_trainer.py OUT [moved | sharded | rank0_empty |
two_tables]: the Trainer over MPI on ragged sentences.

Trains :func:`tests.sequence_tagger.tagger` (float64, Adam) for 2 epochs on
:func:`~tests.sequence_tagger.tagged_set`, 2 sentences a rank a step: epoch 0 leaves rank 1 only
empty sentences in step 0, no token to either rank in step 1, and a short last step. It
evaluates the set after each epoch. Rank 0 saves the parameters to ``OUT`` (.npz) with the last
test loss and accuracy. With ``moved``, rank 1 is handed the same tokens with one sentence
boundary moved in its training set: the job check stops both. With ``sharded``, each rank is
handed its own half of the sentences (as a set sharded by rank: as many sentences, other
rows): the job check stops both, saying not to shard. With ``rank0_empty``, the
sentences are :data:`~tests.sequence_tagger.RANK0_EMPTY_FIRST`: rank 0 runs no backward in the
first step, rank 1 does. With ``two_tables``, those sentences too, and the tagger embeds with
two tables (a backward fires them in parameter order). The sync makes a bucket of each
parameter; each rank saves its buckets and its network's firing order
(:func:`~tests.mpi.common.save_layout`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from distconv.equivalence import weights
from distconv.optim import create_optimizer
from distconv.sequence_set import SequenceSet
from distconv.sync.mpi import MPISync
from distconv.trainer import Trainer
from tests.mpi.common import save_layout
from tests.sequence_tagger import (
    GLOBAL,
    OPTIMIZER,
    RANK0_EMPTY_FIRST,
    lengths_in_order,
    tagged_set,
    tagger,
)


def main() -> None:
    out, moved, sharded = Path(sys.argv[1]), sys.argv[2:] == ["moved"], sys.argv[2:] == ["sharded"]
    tables = 2 if sys.argv[2:] == ["two_tables"] else 1
    rank0_empty = sys.argv[2:] in (["rank0_empty"], ["two_tables"])
    test = data = tagged_set(lengths_in_order(RANK0_EMPTY_FIRST) if rank0_empty else ())
    sync = MPISync(create_optimizer(**OPTIMIZER), bucket_bytes=8)  # one a bucket
    if moved and sync.rank == 1:  # its training set alone
        starts = data.seq_starts.copy()
        starts[2] -= 1  # sentence 1 a token shorter, sentence 2 a token longer
        data = SequenceSet(data.rows, starts, name="moved")
    if sharded:  # its own half, as a loader sharding by rank hands it
        half = len(data) // 2
        data = data.subset(np.arange(sync.rank * half, (sync.rank + 1) * half))
    net = tagger(tables=tables)
    try:
        trainer = Trainer(net, sync, GLOBAL // 2, progress=False, dtype="float64")
        record = trainer.fit(data, test, 2)[-1]
        save_layout(out, sync, net)
    finally:
        sync.close()
    if sync.rank == 0:
        last = {"_test_loss": record["test_loss"], "_test_acc": record["test_acc"]}
        np.savez(out, **weights(net), **last, _steps=record["step"])


if __name__ == "__main__":
    main()
