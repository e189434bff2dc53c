"""Which examples each rank trains on: one global batch per step, whatever the world size.

Every rank draws the same permutation of the data from ``(seed, epoch)``. Step ``t`` takes the
global batch ``perm[t*S : (t+1)*S]`` with ``S = world_size * batch_size * accumulate``; within
it, pass ``k`` takes the next ``world_size * batch_size`` examples and rank ``r`` takes every
``world_size``-th of those, starting at ``r`` (a stride, as PyTorch's ``DistributedSampler``
does). So 1 rank with batch ``N*b``, ``N`` ranks with batch ``b`` and 1 rank accumulating ``N``
passes of ``b`` all see the same set of examples in step ``t``, and, with gradients summed and
divided by the global count, take the same step. The last step of an epoch may be short; it is
split the same way, and a rank may get no example at all in a pass.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from numbers import Integral

import numpy as np


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
    """

    num_examples: int
    batch_size: int
    rank: int = 0
    world_size: int = 1
    accumulate: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.accumulate < 1:
            raise ValueError(
                f"batch_size and accumulate must be >= 1, got {self.batch_size} and "
                f"{self.accumulate}"
            )
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"need 0 <= rank < world_size, got {self.rank} of {self.world_size}")
        if self.num_examples < 1:
            raise ValueError("the training set is empty")
        check_seed(self.seed)

    @property
    def global_batch(self) -> int:
        """Examples per optimizer step, summed over ranks and passes."""
        return self.world_size * self.batch_size * self.accumulate

    @property
    def steps_per_epoch(self) -> int:
        return -(-self.num_examples // self.global_batch)

    def permutation(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch]).permutation(self.num_examples)

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


def check_seed(seed: int, whose: str = "the shuffle's") -> None:
    """Refuse a seed numpy's generators take not: they raised their own "expected
    non-negative integer" (or "SeedSequence expects int or sequence of ints"), naming no seed.

    Args:
        seed: the seed given.
        whose: what the seed seeds, as the message says it.

    Raises:
        ValueError: ``seed`` is not an int >= 0 (a bool neither).
    """
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"seed must be an int >= 0 ({whose}), got {seed!r}")


def stride_shard(num_examples: int, rank: int, world_size: int) -> np.ndarray:
    """The indices rank ``rank`` evaluates: every ``world_size``-th, starting at ``rank``."""
    return np.arange(rank, num_examples, world_size)
