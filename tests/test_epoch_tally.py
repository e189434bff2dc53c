"""EpochTally: an epoch's metric sums, whatever the loss's own dtype."""

import concurrent.futures
import threading

import numpy as np
import pytest

from distconv.epoch_tally import EpochTally
from distconv.evaluation_sums import evaluate_shares
from distconv.optim import create_optimizer
from distconv.resume import Position
from distconv.sampler import GlobalBatchSampler
from distconv.sync import create_sync
from tests.unguarded import unguarded


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


def _answer(values: list, answer: str):
    """Shard 0's answer to a gather of ``values`` (by rank; None for a rank it lost): the
    values, or an ``allreduce``'s sum as the shard adds them."""
    if answer == "values":
        return values
    gathers = pytest.importorskip("distconv.sync.ps.gathers")
    total, why = gathers.rank_order_sum({r: v for r, v in enumerate(values) if v is not None})
    assert why is None, why
    return total


class _LostRank1:
    """Rank 0 of 2 whose shard answers gathers without rank 1, as a parameter server does in
    async mode with ``--on-worker-loss continue`` once rank 1 is lost: the client's own sum."""

    rank, world_size, closed = 0, 2, False
    _set_up = True  # its setup completed: the sums are served

    def _gather(self, kind, value, answer="values"):
        return _answer([value, None], answer)


def test_a_lost_rank_s_share_of_the_test_set_is_not_counted_as_wrong():
    """Every example is right and costs 1. Without rank 1's sums the means were taken over all
    9 examples, as if rank 1's 4 were wrong and free: accuracy 5/9 and loss 5/9."""
    client = pytest.importorskip("distconv.sync.ps.client")
    sync = _LostRank1()
    sync.allreduce_sum = unguarded(client.PServerSync.allreduce_sum).__get__(sync)

    def forward(arrays, rows):
        return np.float32(len(rows)), len(rows)

    result = evaluate_shares(forward, {"x": np.zeros(9)}, sync, 2, accuracy=True)
    assert result == {"test_loss": 1.0, "test_acc": 1.0}


def _rank_of(shard, rank: int, world: int):
    """Rank ``rank`` of ``world``'s sync: the real client's ``allreduce_sum`` over the gather
    of ``shard`` (a stand-in for shard 0 with a ``gather(rank, value)``)."""
    client = pytest.importorskip("distconv.sync.ps.client")
    sync = _LostRank1()
    sync.rank, sync.world_size = rank, world
    sync._gather = lambda kind, value, answer="values": _answer(shard.gather(rank, value), answer)
    sync.allreduce_sum = unguarded(client.PServerSync.allreduce_sum).__get__(sync)
    return sync


class _Shard0:
    """Shard 0's gather for two ranks in threads, answering without rank 1 once it is lost,
    as a parameter server does in async mode with ``--on-worker-loss continue``."""

    def __init__(self):
        self.values, self.lost = [None, None], False
        self.met = threading.Barrier(2)

    def rank(self, rank):
        return _rank_of(self, rank, 2)

    def gather(self, rank, value):
        self.values[rank] = value
        if self.lost:
            return [value, None]
        self.met.wait(timeout=10)
        return list(self.values)


def _steps(tally, n):
    for _ in range(n):
        tally.add(np.float64(2.0 + tally.sync.rank), 1, 2)


@pytest.mark.timeout(30)
def test_a_lost_rank_s_folded_loss_and_examples_stay_in_the_epoch():
    """Each fold summed every rank's running sums from the epoch's start: once an asynchronous
    parameter server lost rank 1 (--on-worker-loss continue), its loss, right answers and
    examples folded before dropped out of the epoch's sums at the next fold."""
    shard = _Shard0()
    sampler = GlobalBatchSampler(40, 4, 0, 2, 1, 0)
    ranks = [EpochTally(shard.rank(r), Position(), sampler) for r in (0, 1)]
    for tally in ranks:
        _steps(tally, 3)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = list(pool.map(lambda t: t.fold(Position(0, 3, 3, {})), ranks))
    for sums in first:  # rank 0's 3 steps of loss 2 and rank 1's of loss 3
        assert (sums["loss"], sums["correct"], sums["examples"]) == (15.0, 6.0, 12.0)
    shard.lost = True  # rank 1 gone; rank 0 trains a step on
    _steps(ranks[0], 1)
    second = ranks[0].fold(Position(0, 4, 4, {}))
    assert (second["loss"], second["correct"], second["examples"]) == (17.0, 7.0, 14.0)


class _WithoutRank0:
    """Ranks 1 and 2 of 3 in threads, their gather answered without rank 0, as a parameter
    server does in async mode with ``--on-worker-loss continue`` once rank 0 is lost."""

    def __init__(self):
        self.values, self.met = [None, None, None], threading.Barrier(2)

    def rank(self, rank):
        return _rank_of(self, rank, 3)

    def gather(self, rank, value):
        self.values[rank] = value
        self.met.wait(timeout=10)
        return list(self.values)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("same", [True, False])
def test_the_marks_of_the_sets_are_compared_without_a_lost_rank_0(same):
    """The sum carries the marks in a fixed count of values: ranks 1 and 2, rank
    0 lost, evaluate as one where handed the same set, and both stop where not (no rank 0 to
    name: 'another rank')."""
    shard = _WithoutRank0()
    sets = {1: {"x": np.arange(9.0)}, 2: {"x": np.arange(9.0) + (0 if same else 1)}}

    def forward(arrays, rows):
        return np.float32(len(rows)), len(rows)

    def evaluate(rank):
        try:
            return evaluate_shares(forward, sets[rank], shard.rank(rank), 2, accuracy=True)
        except Exception as exc:  # noqa: BLE001 - each rank's outcome is compared
            return exc

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        one, two = pool.map(evaluate, (1, 2))
    if same:  # ranks 1 and 2 forwarded 3 examples each
        assert one == two == {"test_loss": 1.0, "test_acc": 1.0}
    else:
        assert str(one).startswith("rank 1 and another rank evaluate different sets"), one
        assert str(two).startswith("rank 2 and another rank evaluate different sets"), two
