"""The Trainer's data check through parameter servers (real shards on 127.0.0.1, workers in
threads): a worker handed its own shard of the data stops at start-up, naming it, and a later
fit on other data (every rank alike) still trains, as the shards keep only setup's description
of the job, which the data are not part of."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker, run_ranks, small_net

from distconv.sync.base import SyncError
from distconv.sync.errors import DATA_ADVICE
from distconv.trainer import Trainer


def _data(n: int = 32, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"image": rng.standard_normal((n, 1, 8, 8)), "label": rng.integers(0, 4, n)}


@pytest.mark.timeout(60)
def test_a_worker_handed_its_own_shard_stops_at_start_up_naming_it(shards):
    endpoints = shards.start(1, 2)
    whole = _data()

    def rank(r: int) -> str:
        sync = insecure_worker(endpoints, r, 2, timeout=20)
        mine = whole if r == 0 else {k: a[1::2] for k, a in whole.items()}  # Horovod's habit
        try:
            Trainer(small_net(), sync, 4, progress=False).fit(mine, epochs=1)
        except SyncError as error:
            return str(error)
        finally:
            sync.close()
        return "trained"

    said = run_ranks(rank, 2)
    for r, message in enumerate(said):
        assert f"rank {r} and rank {1 - r} run different jobs: train_data.examples" in message
        assert message.endswith(DATA_ADVICE), message  # what to do, as MPI's check says it


@pytest.mark.timeout(60)
def test_a_second_fit_on_other_data_still_trains(shards):
    sync = insecure_worker(shards.start(1, 1), timeout=20)
    try:
        trainer = Trainer(small_net(), sync, 8, progress=False)
        trainer.fit(_data(32), epochs=1)
        trainer.fit(_data(16, seed=1), epochs=2)  # a curriculum: the same job, other data
        assert [r["step"] for r in trainer.history] == [2, 4]  # two epochs of 16 examples
    finally:
        sync.close()
