"""Which examples each rank trains on: one global batch per step, whatever the world size.

Every rank draws the same permutation of the data from ``(seed, epoch)``. Step ``t`` takes the
global batch ``perm[t*S : (t+1)*S]`` with ``S = world_size * batch_size * accumulate``; within
it, pass ``k`` takes the next ``world_size * batch_size`` examples and rank ``r`` takes every
``world_size``-th of those, starting at ``r`` (a stride, as PyTorch's ``DistributedSampler``
does). So 1 rank with batch ``N*b``, ``N`` ranks with batch ``b`` and 1 rank accumulating ``N``
passes of ``b`` all see the same set of examples in step ``t``, and, with gradients summed and
divided by the global count, take the same step. The last step of an epoch may be short; it is
split the same way, and a rank may get no example at all in a pass.

:func:`batches` (with :func:`shard_indices` and :func:`num_batches`), for a loop of one's own,
shards otherwise: worker ``r`` of ``W`` takes the ``r``-th contiguous ``n // W`` examples of the
same permutation and batches them, so its batches are not the ones a Trainer's rank trains on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

import distconv  # annotations name types through it: get_type_hints imports them then
from distconv.kernels.shape import is_int

if TYPE_CHECKING:  # duck-typed at run time: sampler is imported by the layers (init.set_seed)
    import distconv.data


@dataclass(frozen=True)
class GlobalBatchSampler:
    """The index arrays of one rank's passes, step by step.

    Args:
        num_examples: size of the training set.
        batch_size: examples per pass on each rank (per worker, as in DDP and Horovod).
        rank: this rank.
        world_size: ranks in the job.
        accumulate: passes per optimizer step (gradient accumulation).
        seed: with the epoch, the only input to the shuffle.

    Raises:
        DataError: ``num_examples`` is 0: the training set is empty.
        ValueError: another argument out of its range.
    """

    num_examples: int
    batch_size: int
    rank: int = 0
    world_size: int = 1
    accumulate: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        check_count("batch_size", self.batch_size, 1)
        check_count("accumulate", self.accumulate, 1)
        check_count("world_size", self.world_size, 1)  # True: a world of one, silently
        check_count("rank", self.rank, 0)
        if not self.rank < self.world_size:
            raise ValueError(f"need 0 <= rank < world_size, got {self.rank} of {self.world_size}")
        check_count("num_examples", self.num_examples, 0)  # 10.0 failed at the first pass
        if self.num_examples < 1:  # the data's fault, as fit's other refusals of them
            from distconv.data import DataError  # data imports this module: not at the top

            raise DataError("the training set is empty")
        check_seed(self.seed)

    @property
    def global_batch(self) -> int:
        """Examples per optimizer step, summed over ranks and passes."""
        return self.world_size * self.batch_size * self.accumulate

    @property
    def examples_per_step(self) -> int:
        """Examples a step trains on, summed over ranks and passes, but an epoch's last (which
        may be short): the global batch, or the whole training set where that is smaller."""
        return min(self.global_batch, self.num_examples)

    def larger_than_the_data(self) -> str | None:
        """What to tell the user where the global batch asked for exceeds the training set,
        naming its factors, or None. It is accepted, as a data loader gives a short last batch:
        each epoch is one step of every example, and :attr:`examples_per_step` (which the log
        and metrics record) says so."""
        if self.global_batch <= self.num_examples:
            return None
        return (
            f"the global batch asked for ({self.global_batch}: {self.world_size} worker(s) x "
            f"batch size {self.batch_size} x accumulate {self.accumulate}) exceeds the "
            f"{self.num_examples} training examples: each epoch is one step of all "
            f"{self.num_examples}, and the log and metrics record that global batch"
        )

    @property
    def steps_per_epoch(self) -> int:
        return -(-self.num_examples // self.global_batch)

    def permutation(self, epoch: int) -> np.ndarray:
        return epoch_permutation(self.num_examples, self.seed, epoch)

    def step_examples(self, step_in_epoch: int) -> int:
        """How many examples the whole job trains on in this step (the last may be short)."""
        start = step_in_epoch * self.global_batch
        return max(0, min(self.global_batch, self.num_examples - start))

    def passes(self, epoch: int, start_step: int = 0) -> Iterator[list[np.ndarray]]:
        """For each step from ``start_step`` on: this rank's index array for each pass."""
        perm = self.permutation(epoch)
        per_pass = self.world_size * self.batch_size
        for step in range(start_step, self.steps_per_epoch):
            chunk = perm[step * self.global_batch : (step + 1) * self.global_batch]
            yield [
                chunk[k * per_pass : (k + 1) * per_pass][self.rank :: self.world_size]
                for k in range(self.accumulate)
            ]


def epoch_permutation(n: int, seed: int, epoch: int) -> np.ndarray:
    """The order of ``n`` examples in ``epoch``: drawn from ``(seed, epoch)`` alone.

    Raises:
        ValueError: ``epoch`` is not an int >= 0: numpy's SeedSequence named no epoch (-1,
            1.5, None), and took True and "1" for epoch 1 without a word.
    """
    check_count("epoch", epoch, 0)
    return np.random.default_rng([seed, epoch]).permutation(n)


def check_seed(seed: int, whose: str = "the shuffle's") -> None:
    """Refuse a seed numpy's generators take not: they raised their own "expected
    non-negative integer" (or "SeedSequence expects int or sequence of ints"), naming no seed.

    Args:
        seed: the seed given.
        whose: what the seed seeds, as the message says it.

    Raises:
        ValueError: ``seed`` is not an int >= 0 (a bool neither).
    """
    if not _is_count(seed, 0):
        raise ValueError(f"seed must be an int >= 0 ({whose}), got {seed!r}")


def _is_count(value: Any, low: int) -> bool:
    return is_int(value) and value >= low


def check_count(name: str, value: Any, low: int) -> None:
    """Refuse ``value`` unless it is an int (numpy's too, not a bool) of at least ``low``: a
    float failed later as "'float' object cannot be interpreted as an integer", and True was
    taken for 1 without a word (a batch of one).

    Raises:
        ValueError: naming ``name``, the bound and the value given.
    """
    if not _is_count(value, low):
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")


def stride_shard(num_examples: int, rank: int, world_size: int) -> np.ndarray:
    """The indices rank ``rank`` evaluates: every ``world_size``-th, starting at ``rank``."""
    return np.arange(rank, num_examples, world_size)


# -- a worker's shard, batch by batch, for a loop of one's own ------------------------------


def shard_indices(
    n: int, seed: int, epoch: int, shard: tuple[int, int] = (0, 1), shuffle: bool = True
) -> np.ndarray:
    """The example indices worker ``shard = (rank, world_size)`` visits in ``epoch``.

    The permutation depends only on ``(seed, epoch)``. Every worker gets ``n // world_size``
    examples, so all take the same number of steps (synchronous training needs that); the few
    left over differ by epoch if shuffled, else are the last ``n % world_size`` every epoch.

    Raises:
        ValueError: ``shard`` is not two ints with ``0 <= rank < world_size``, ``seed`` is not
            an int >= 0, or ``n`` examples cannot be shared among ``world_size`` workers.
    """
    rank, world = shard
    # ints as batch_size is (check_count): (0, True) was a world of one without a word, and
    # (0, 2.0) failed as "slice indices must be integers"
    if not (_is_count(world, 1) and _is_count(rank, 0) and rank < world):
        raise ValueError(
            f"shard must be (rank, world_size), ints with 0 <= rank < world_size, got {shard!r}"
        )
    check_seed(seed)  # numpy's own "expected non-negative integer" named no seed
    check_shareable(n, world)
    perm = epoch_permutation(n, seed, epoch) if shuffle else np.arange(n)
    per_worker = n // world
    return perm[rank * per_worker : (rank + 1) * per_worker]


def check_shareable(n: int, world_size: int) -> None:
    """Refuse ``n`` examples that ``world_size`` workers cannot each get one of.

    Raises:
        ValueError: ``n < world_size`` (an empty or negative set among them).
    """
    if n < world_size:
        raise ValueError(f"{n} examples cannot be shared among {world_size} workers")


def batches(
    dataset: distconv.data.Dataset,
    batch_size: int,
    seed: int = 0,
    epoch: int = 0,
    shard: tuple[int, int] = (0, 1),
    *,
    shuffle: bool = True,
    drop_last: bool = False,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(images, labels)`` batches of this worker's shard for one epoch.

    Args:
        dataset: the data set.
        batch_size: examples per batch on this worker.
        seed: with ``epoch``, the only input to the shuffle.
        epoch: the epoch number (0-based).
        shard: ``(rank, world_size)``; workers of one job get disjoint examples.
        shuffle: False keeps the data set's order (evaluation).
        drop_last: skip a last batch smaller than ``batch_size``.

    Raises:
        ValueError: ``batch_size`` is not an int >= 1, or as :func:`shard_indices` refuses.
    """
    check_count("batch_size", batch_size, 1)
    index = shard_indices(len(dataset), seed, epoch, shard, shuffle)
    stop = len(index) - len(index) % batch_size if drop_last else len(index)
    for start in range(0, stop, batch_size):
        i = index[start : start + batch_size]
        yield dataset.x[i], dataset.y[i]


def num_batches(n: int, batch_size: int, world_size: int = 1, *, drop_last: bool = False) -> int:
    """How many batches :func:`batches` yields per worker per epoch.

    Raises:
        ValueError: as :func:`batches` refuses these sizes (it answered 0 batches for a set
            it refuses, and a negative count for a negative ``n``).
    """
    check_count("batch_size", batch_size, 1)
    check_count("world_size", world_size, 1)
    check_shareable(n, world_size)
    per_worker = n // world_size
    return per_worker // batch_size if drop_last else -(-per_worker // batch_size)
