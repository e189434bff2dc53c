"""EpochTally: an epoch's metric sums, whatever the loss's own dtype."""

import numpy as np
import pytest

from distconv.epoch_tally import EpochTally, evaluate_shares
from distconv.optim import create_optimizer
from distconv.resume import Position
from distconv.sampler import GlobalBatchSampler
from distconv.sync import create_sync


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_16_bit_loss_is_summed_over_the_epoch_in_float32(dtype):
    """750 steps of a 100-example loss of 1.4 each: their sum, 105000, is past float16's range
    (a spurious "the loss became NaN or infinite") and, in bfloat16, stops growing at 2**15,
    where a step's 140 is below half the spacing."""
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    step_loss = np.asarray(140, dtype)[()]  # a step's summed loss, as the layers make it
    sync = create_sync("local", optimizer=create_optimizer("sgd"))
    tally = EpochTally(sync, Position(), GlobalBatchSampler(75000, 100, 0, 1, 1, 0))
    for _ in range(750):
        tally.add(step_loss, 0, 100)
    sums = tally.fold(Position(0, 750, 750, {}))
    assert sums["loss"] == pytest.approx(750 * 140, rel=1e-6)
    assert sums["examples"] == 75000


class _LostRank1:
    """Rank 0 of 2 whose shard answers gathers without rank 1, as a parameter server does in
    async mode with ``--on-worker-loss continue`` once rank 1 is lost: the client's own sum."""

    rank, world_size, closed = 0, 2, False

    def _gather(self, kind, value):
        return [value, None]


def test_a_lost_rank_s_share_of_the_test_set_is_not_counted_as_wrong():
    """Every example is right and costs 1. Without rank 1's sums the means were taken over all
    9 examples, as if rank 1's 4 were wrong and free: accuracy 5/9 and loss 5/9."""
    client = pytest.importorskip("distconv.sync.ps.client")
    sync = _LostRank1()
    sync.allreduce_sum = client.PServerSync.allreduce_sum.__get__(sync)

    def forward(arrays, rows):
        return np.float32(len(rows)), len(rows)

    result = evaluate_shares(forward, {"x": np.zeros(9)}, sync, 2, accuracy=True)
    assert result == {"test_loss": 1.0, "test_acc": 1.0}
