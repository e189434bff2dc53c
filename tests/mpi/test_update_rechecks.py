"""finish_step hands the first bucket's checked parameters straight to its update (not checked
twice on the way to the step's first update); every later bucket is checked again, after the
optimizer ran on the buckets before it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from distconv.optim import SGD
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.mpi import MPISync, SingleRankComm

pytestmark = pytest.mark.timeout(30)


class Replacing(SGD):
    """SGD that, on its first update of a step, replaces ``victim``'s gradient with a copy
    (what a misbehaving optimizer or hook could do while the sync still owns it)."""

    victim: Parameter | None = None

    def update(self, value: Any, grad: Any, state: Any, grad_scale: float = 1.0) -> None:
        victim, self.victim = self.victim, None
        if victim is not None:
            victim.grad = victim.grad.copy()
        super().update(value, grad, state, grad_scale)


def one_step(victim_bucket: int) -> tuple[MPISync, list[Parameter], list[np.ndarray]]:
    """Two buckets of one parameter each, one rank; the step's first update replaces the
    gradient of the parameter of bucket ``victim_bucket``."""
    optimizer = Replacing(lr=0.5)
    sync = MPISync(optimizer, comm=SingleRankComm(), bucket_bytes=64, overlap=False)
    params = [Parameter(f"p{i}", np.ones(16, np.float32)) for i in range(2)]
    sync.setup(params, {})
    assert [len(b.params) for b in sync.buckets] == [1, 1]
    sync.start_step(1)
    for p in reversed(params):
        p.grad += 1.0
        sync.on_gradient(p)
    optimizer.victim = sync.buckets[victim_bucket].params[0]
    before = [p.value.copy() for p in params]
    return sync, params, before


def test_a_later_buckets_gradient_replaced_during_an_earlier_update_is_refused():
    """Replaced by the first bucket's update: the second bucket's update refuses it (the
    optimizer would read that array, not the sum) and leaves its parameter alone."""
    sync, params, before = one_step(victim_bucket=1)
    late = sync.buckets[1].params[0]
    with pytest.raises(SyncError, match=f"gradient of {late.name!r} was replaced"):
        sync.finish_step()
    np.testing.assert_array_equal(late.value, before[params.index(late)])


def test_the_first_bucket_is_checked_once_and_each_later_one_again_at_its_update():
    """The check before any update reads every bucket; only the first bucket's update, made
    next with no call between, takes that list: one identity test per parameter fewer on the
    way to the step's first update, the later buckets' checks as they were."""
    sync, params, before = one_step(victim_bucket=0)
    calls = [0, 0]
    for bucket in sync.buckets:
        check = bucket.to_update

        def counted(*args: Any, check: Any = check, index: int = bucket.index) -> Any:
            calls[index] += 1
            return check(*args)

        bucket.to_update = counted  # type: ignore[method-assign]
    sync.finish_step()
    assert calls == [1, 2]
    for p, was in zip(params, before):  # the first bucket's, replaced after its check: updated
        np.testing.assert_array_equal(p.value, was - 0.5)
