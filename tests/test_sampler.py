"""GlobalBatchSampler: one global batch per step, strided over ranks, seeded by (seed, epoch)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.data import Dataset
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sampler import GlobalBatchSampler, batches, num_batches
from distconv.sync import create_sync
from distconv.trainer import Trainer


def _epoch(n, batch, world, accumulate, seed=3, epoch=0, start=0):
    """Every rank's index arrays of each pass, step by step."""
    return [
        list(GlobalBatchSampler(n, batch, r, world, accumulate, seed).passes(epoch, start))
        for r in range(world)
    ]


@pytest.mark.parametrize("world", [1, 2, 3])
@pytest.mark.parametrize("n", [1, 7, 10, 31])
@pytest.mark.parametrize("batch,accumulate", [(1, 1), (3, 1), (2, 3), (5, 2)])
def test_every_example_once_per_epoch_and_a_resume_goes_on_in_the_same_order(
    world, n, batch, accumulate
):
    ranks = _epoch(n, batch, world, accumulate)
    sampler = GlobalBatchSampler(n, batch, 0, world, accumulate, 3)
    assert all(len(steps) == sampler.steps_per_epoch for steps in ranks)
    seen = [i for steps in ranks for passes in steps for idx in passes for i in idx.tolist()]
    assert sorted(seen) == list(range(n))
    for t in range(sampler.steps_per_epoch):
        step = sum(len(idx) for steps in ranks for idx in steps[t])
        assert step == sampler.step_examples(t)
    for start in range(sampler.steps_per_epoch + 1):
        resumed = _epoch(n, batch, world, accumulate, start=start)
        for whole, rest in zip(ranks, resumed):
            assert len(rest) == len(whole) - start
            for a, b in zip(whole[start:], rest):
                assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_the_shuffle_follows_the_seed_and_the_epoch_alone():
    a = GlobalBatchSampler(100, 10, seed=1)
    np.testing.assert_array_equal(
        a.permutation(2), GlobalBatchSampler(100, 4, seed=1).permutation(2)
    )
    assert not np.array_equal(a.permutation(2), a.permutation(3))
    assert not np.array_equal(a.permutation(2), GlobalBatchSampler(100, 10, seed=2).permutation(2))


@pytest.mark.parametrize("seed", [-1, 1.5, True, "0"])
def test_a_seed_numpy_cannot_take_is_refused_naming_it(seed):
    """numpy's own "expected non-negative integer" came at the first epoch, after the run's
    setup and job check (with an out_dir, after its lock and metrics file), naming no seed."""
    with pytest.raises(
        ValueError, match=rf"seed must be an int >= 0 \(the shuffle's\), got {seed!r}"
    ):
        GlobalBatchSampler(10, 2, seed=seed)
    sync = create_sync("local", optimizer=create_optimizer("sgd"))
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        Trainer(lenet(), sync, 2, seed=seed, progress=False)
    assert GlobalBatchSampler(10, 2, seed=np.int64(2**40)).permutation(0).shape == (10,)


@pytest.mark.parametrize("data", ["digits", "synthetic", "mnist"])
def test_a_job_refuses_a_seed_numpy_cannot_take_before_it_draws_from_it(data, tmp_path):
    """train(TrainConfig(seed=-1)) stopped on numpy's "expected non-negative integer" from the
    data split (digits, synthetic) or set_seed (mnist), before the Trainer's check could name
    the seed; nothing may be loaded or written first."""
    from distconv.data import write_idx
    from distconv.job import TrainConfig, train

    data_dir = None
    if data == "mnist":  # a set that loads: the seed's first use is then set_seed
        data_dir = str(tmp_path)
        for name, n in (("train", 20), ("t10k", 10)):
            write_idx(tmp_path / f"{name}-images-idx3-ubyte", np.zeros((n, 8, 8), np.uint8))
            write_idx(tmp_path / f"{name}-labels-idx1-ubyte", np.arange(n) % 10)
    out = tmp_path / "run"
    config = TrainConfig(data=data, data_dir=data_dir, epochs=1, seed=-1, out=str(out))
    with pytest.raises(ValueError, match=r"seed must be an int >= 0 \(the shuffle's\), got -1"):
        train(config)
    assert not out.exists()


@pytest.mark.parametrize("seed", [-1, 1.5, "0", True])
def test_an_initialisers_seed_numpy_takes_not_is_refused_naming_the_seed(seed):
    """set_seed(-1) raised numpy's "expected non-negative integer", set_seed(1.5) its
    "SeedSequence expects int or sequence of ints", and set_seed(True) seeded with 1.
    """
    from distconv.init import set_seed

    with pytest.raises(ValueError, match=r"seed must be an int >= 0 \(the initialisers'\)"):
        set_seed(seed)


@pytest.mark.parametrize("size, said", [(True, "True"), (2.5, r"2\.5"), ("4", "'4'")])
def test_a_batch_size_that_is_not_an_int_is_refused_by_the_samplers_too(size, said):
    """batches(), num_batches() and GlobalBatchSampler, for a loop of one's own, took True for
    a batch of one without a word and failed on 2.5 with "'float' object cannot be interpreted
    as an integer"; the Trainer refused both, by the same check."""
    data = Dataset(np.zeros((10, 1, 1, 1), np.float32), np.arange(10) % 2, 2)
    refused = rf"batch_size must be an int >= 1, got {said}"
    with pytest.raises(ValueError, match=refused):
        list(batches(data, size))
    with pytest.raises(ValueError, match=refused):
        num_batches(10, size)
    with pytest.raises(ValueError, match=refused):
        GlobalBatchSampler(10, size)
    with pytest.raises(ValueError, match=rf"accumulate must be an int >= 1, got {said}"):
        GlobalBatchSampler(10, 4, accumulate=size)
    assert num_batches(10, np.int64(4)) == 3  # numpy's ints are counts


@pytest.mark.parametrize(
    "shard, said",
    [((0, True), r"\(0, True\)"), ((0, 2.0), r"\(0, 2\.0\)"), ((0.0, 2), r"\(0\.0, 2\)")],
)
def test_a_shard_that_is_not_two_ints_is_refused_as_a_batch_size_is(shard, said):
    """b9b579c checked batches()'s batch_size and num_batches()'s world_size, but not the
    shard's: batches(data, 2, shard=(0, True)) took a world of one without a word, and
    (0, 2.0) failed with "slice indices must be integers or None"; GlobalBatchSampler took
    world_size=True."""
    data = Dataset(np.zeros((10, 1, 1, 1), np.float32), np.arange(10) % 2, 2)
    with pytest.raises(ValueError, match=rf"ints with 0 <= rank < world_size, got {said}"):
        list(batches(data, 2, shard=shard))
    with pytest.raises(ValueError, match=r"world_size must be an int >= 1, got True"):
        GlobalBatchSampler(10, 2, world_size=True)
    with pytest.raises(ValueError, match=r"world_size must be an int >= 1, got 2\.0"):
        GlobalBatchSampler(10, 2, world_size=2.0)
    with pytest.raises(ValueError, match=r"rank must be an int >= 0, got False"):
        GlobalBatchSampler(10, 2, rank=False, world_size=2)
    with pytest.raises(ValueError, match=r"seed must be an int >= 0 \(the shuffle's\), got -1"):
        list(batches(data, 2, seed=-1))
    assert len(list(batches(data, 2, shard=(np.int64(1), np.int64(2))))) == 3  # numpy's ints


@pytest.mark.parametrize("n, world", [(1, 2), (3, 4), (-5, 1), (0, 1)])
def test_num_batches_refuses_what_batches_refuses(n, world):
    """num_batches() answered 0 batches where batches() refuses the shard ("1 examples cannot
    be shared among 2 workers"), and -2 for n = -5: a count of a loop that never runs, or a
    negative one, instead of the refusal."""
    data = Dataset(np.zeros((max(n, 0), 1, 1, 1), np.float32), np.zeros(max(n, 0), np.int64), 1)
    with pytest.raises(ValueError, match=rf"{n} examples cannot be shared among {world} worker"):
        num_batches(n, 1, world)
    if n >= 0:
        with pytest.raises(ValueError, match=rf"{n} examples cannot be shared among {world}"):
            list(batches(data, 1, shard=(0, world)))


@pytest.mark.parametrize("n, said", [(True, "True"), (10.0, r"10\.0"), ("10", "'10'")])
def test_a_training_set_size_that_is_not_an_int_is_refused_naming_it(n, said):
    """GlobalBatchSampler took num_examples=True for a set of one without a word, failed on
    10.0 only when a pass was drawn ("'float' object cannot be interpreted as an integer") and
    on "10" with a TypeError comparing it to 1, as batch_size did before check_count."""
    with pytest.raises(ValueError, match=rf"num_examples must be an int >= 0, got {said}"):
        next(GlobalBatchSampler(n, 2).passes(0))
    with pytest.raises(ValueError, match="the training set is empty"):
        GlobalBatchSampler(0, 2)
    assert GlobalBatchSampler(np.int64(3), 2).steps_per_epoch == 2  # numpy's ints are counts


@pytest.mark.parametrize(
    "epoch, said", [(-1, "-1"), (1.5, r"1\.5"), (True, "True"), ("1", "'1'"), (None, "None")]
)
def test_an_epoch_that_is_not_an_int_is_refused_naming_it(epoch, said):
    """The epoch went to numpy's SeedSequence as given: -1 failed with "expected non-negative
    integer", 1.5 with "seed must be integer" and None with "object of type 'NoneType' has no
    len()", none naming the epoch, while True and "1" drew epoch 1's order without a word.
    """
    data = Dataset(np.zeros((10, 1, 1, 1), np.float32), np.arange(10) % 2, 2)
    refused = rf"epoch must be an int >= 0, got {said}"
    with pytest.raises(ValueError, match=refused):
        list(batches(data, 2, epoch=epoch))
    with pytest.raises(ValueError, match=refused):
        next(GlobalBatchSampler(10, 2).passes(epoch))
    same = GlobalBatchSampler(10, 2).permutation(np.int64(1))  # numpy's ints are counts
    np.testing.assert_array_equal(same, np.random.default_rng([0, 1]).permutation(10))
