"""An asynchronous run's metrics lines count its pushes as the shards do where a step's pushes
are more than one a shard: a sparse table's rows go in a push message of their own, beside the
dense gradients', so each worker's step is two updates on the table's shard. Over two shards, at
bound 0, with checkpoints folding the sums mid-epoch and a short last step that leaves rank 1 no
example, the lines add up to the workers' ``traffic()`` and to the shards' stats. Real shards,
two Trainers as threads."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker, sparse_table_net
from test_async_straggler_metrics import fit_ranks

from distconv.epoch_sums import PUSH_COUNTS as PUSHES
from distconv.trainer import Trainer

#: the table's rows and width, the classes, and each rank's examples a step
VOCAB, WIDTH, CLASSES, BATCH = 40, 4, 3, 2


def sparse_run(shards, tmp_path, servers: int, staleness: int, examples: int):
    """Two workers train :func:`sparse_table_net` for 2 epochs on ``servers`` async shards
    (bound ``staleness``), checkpointing every 3 steps: the chief's lines, the syncs (closed),
    the shards' stats."""
    extra = ["--max-staleness", str(staleness)]
    endpoints = shards.start(servers, workers=2, mode="async", extra=extra)
    rng = np.random.default_rng(1)
    data = {"words": rng.integers(0, VOCAB, examples), "label": rng.integers(0, CLASSES, examples)}
    syncs = [insecure_worker(endpoints, r, 2, lr=0.01, block_bytes=256) for r in range(2)]
    out = tmp_path / "run"
    trainers = [
        Trainer(
            sparse_table_net(VOCAB, WIDTH, CLASSES),
            syncs[r],
            BATCH,
            out_dir=out if r == 0 else None,
            progress=False,
            checkpoint_every=3,
            accuracy=None,
        )
        for r in range(2)
    ]
    return fit_ranks(trainers, syncs, data, 2, out)


@pytest.mark.timeout(120)
def test_a_steps_sparse_rows_are_a_push_of_their_own_in_the_lines(shards, tmp_path):
    """One shard, no drop: each worker's step is two push messages applied (the dense
    gradients', the table's rows'), 2 workers x 9 steps x 2 an epoch."""
    lines, syncs, _ = sparse_run(shards, tmp_path, 1, 1000, 2 * BATCH * 9)
    assert [line["step"] for line in lines] == [9, 18]
    assert [[line[k] for k in PUSHES] for line in lines] == [[36, 0], [36, 0]]
    assert [sync.push_messages for sync in syncs] == [36, 36]


@pytest.mark.timeout(120)
def test_lines_add_up_to_the_workers_and_the_shards_counts_over_two_shards(shards, tmp_path):
    lines, syncs, stats = sparse_run(shards, tmp_path, 2, 0, 2 * BATCH * 9 + 1)
    assert [line["step"] for line in lines] == [10, 20]
    ours = [sum(line[k] for line in lines) for k in PUSHES]
    assert ours == [sum(sync.traffic()[k] for sync in syncs) for k in PUSHES]
    assert ours == [sum(s[k] for s in stats) for k in PUSHES]
    assert sum(ours) <= sum(s["push_messages"] for s in stats)
