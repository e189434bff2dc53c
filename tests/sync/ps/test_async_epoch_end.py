"""An asynchronous job's epoch end and stop, on real shard processes.

At an epoch's end every rank pulls the shards' values once the epoch's steps are all in (the
tally's fold, a collective); the chief's checkpoint that follows, with no step in between,
must not pull the whole model a second time. The pulls are counted by a wrapper around the
real client's requests; the values the ranks end with are the shards' own.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from ps_helpers import insecure_worker, run_ranks, shard_values, small_net

from distconv.checkpoint import load_checkpoint
from distconv.run_dir import CHIEF_PART
from distconv.sync.ps.client import PServerSync
from distconv.trainer import Trainer

EPOCHS = 2


class CountedPulls:
    """Counts the whole-model pulls ``sync`` sends: its ``pull`` requests without ``rows``."""

    def __init__(self, sync: PServerSync) -> None:
        self.pulls = 0
        send = sync._send

        def counted(shard: int, header: dict[str, Any], *args: Any, **kwargs: Any) -> int:
            if header.get("op") == "pull" and "rows" not in header:
                self.pulls += 1
            return send(shard, header, *args, **kwargs)

        sync._send = counted


def data(examples: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {
        "image": rng.standard_normal((examples, 1, 8, 8)),
        "label": rng.integers(0, 4, examples),
    }


@pytest.mark.timeout(120)
@pytest.mark.parametrize("examples", [32, 33], ids=["even", "rank-1-short"])
def test_the_chief_pulls_once_per_epoch_end_and_holds_the_shards_values(shards, tmp_path, examples):
    """One shard, so one pull request is one pull of the whole model; the chief writes a
    checkpoint at each epoch's end, after the refresh every rank makes. 33 examples in global
    batches of 8: rank 1 has none in each epoch's last step (it finishes its data first).
    Nothing of the workers runs on once they are closed."""
    (endpoint,) = shards.start(1, workers=2, mode="async", extra=["--max-staleness", "100"])
    nets = [small_net(seed=r) for r in range(2)]
    syncs = [insecure_worker([endpoint], r, 2, lr=0.1) for r in range(2)]
    counts = [CountedPulls(s) for s in syncs]
    out = [tmp_path / "run", None]
    trainers = [Trainer(nets[r], syncs[r], 4, out_dir=out[r], progress=False) for r in range(2)]
    try:
        run_ranks(lambda r: trainers[r].fit(data(examples), epochs=EPOCHS), 2)
        trained = shard_values([endpoint])
    finally:
        for s in syncs:
            s.close()
    # the syncs' threads are gone; the kernels' pool (distconv-kernel_N) lives for the process
    left = [t.name for t in threading.enumerate() if t.name.startswith("distconv")]
    assert [name for name in left if not name.startswith("distconv-kernel")] == []
    newest = max(out[0].rglob(CHIEF_PART), key=lambda f: load_checkpoint(f).step)
    held = {"checkpoint": load_checkpoint(newest).params}
    held |= {f"rank {r}": {p.name: p.value for p in nets[r].parameters()} for r in range(2)}
    for who, values in held.items():
        for name, value in trained.items():
            np.testing.assert_array_equal(values[name], value, err_msg=who)
    # rank 1 pulls at setup too; nobody pulls twice at an epoch's end
    assert [c.pulls for c in counts] == [EPOCHS, 1 + EPOCHS]
