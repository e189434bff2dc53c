"""A worker told of another rank's failed setup fits again in the same process and meets the
fixed fit of the rank that failed: real ``PServerSync`` workers (threads) on a served shard.

The told rank's refused job check was a gather the failed rank never made (its failure note's
hello is refused before any gather). Numbered over the worker's whole life, the told rank's
next job check was ``all_equal:2`` and the fixed rank's ``all_equal:1``: the job failed, at
once as ranks at different points of the job, or at the shard's timeout blaming the fixed
rank. Each setup numbers its gathers from 1 now."""

from __future__ import annotations

import time

import numpy as np
import pytest
from ps_helpers import (
    assert_equals_local_training,
    batches,
    insecure_worker,
    regression_net,
    run_ranks,
    served,
    small_net,
    train_steps,
)

from distconv.parameter import Parameter
from distconv.sync import JobRefused, SyncError
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard
from distconv.trainer import Trainer

#: the shard's --timeout: a refit that never meets fails the test at it, a good one is far sooner
SHARD_TIMEOUT = 8.0


def _shard() -> Shard:
    return Shard(ShardConfig(bind="127.0.0.1:0", workers=2, insecure=True, timeout=SHARD_TIMEOUT))


def _until(what: str, done) -> None:
    """Return once ``done()`` holds (the other thread's request reached the shard)."""
    deadline = time.monotonic() + SHARD_TIMEOUT
    while not done():
        assert time.monotonic() < deadline, f"{what} never came"
        time.sleep(0.01)


def _in_a_gather(shard: Shard, rank: int) -> bool:
    """Whether ``rank`` waits in a gather on ``shard`` (read from another thread)."""
    return any(
        rank in held.by_rank for key, held in list(shard.waiting.items()) if "gather:" in key
    )


@pytest.mark.timeout(40)
@pytest.mark.parametrize("first", ["told", "fixed"], ids=["told-refits-first", "fixed-first"])
def test_a_told_rank_that_sets_up_again_trains_with_the_fixed_rank(first):
    """Rank 1 waits in its job check; rank 0's setup fails before its hello (two parameters
    named ``w``), and rank 1 is told. Both set up again (in either order of their hellos) and
    train two steps together: each rank's parameters are those of one process trained on the
    whole batches."""
    data = batches(2, 8)
    nets = [small_net() for _ in range(2)]  # here: its seed is global, threads would share it
    with served(_shard()) as shard:

        def rank(r: int) -> list[object]:
            net, said = nets[r], []
            sync = insecure_worker([shard.endpoint], r, 2, timeout=SHARD_TIMEOUT)
            try:
                if r == 0:
                    _until("rank 1's job check", lambda: _in_a_gather(shard, 1))
                    twice = [Parameter("w", np.ones(3)), Parameter("w", np.ones(2))]
                    with pytest.raises(ValueError, match="two parameters are named 'w'"):
                        sync.setup(twice)
                else:
                    with pytest.raises(JobRefused) as told:
                        sync.setup(net.parameters())
                    said.append(str(told.value))
                if (r == 0) == (first == "told"):  # this rank's hello comes second
                    _until("the other rank's refit", lambda: _in_a_gather(shard, 1 - r))
                sync.setup(net.parameters())
                train_steps(net, sync, data, r, 2)
            finally:
                sync.close()
            return said

        began = time.monotonic()
        _, said = run_ranks(rank, 2, timeout=SHARD_TIMEOUT + 20)
        took = time.monotonic() - began
        assert shard.failed is None, shard.failed
    assert ": rank 0 could not set up: ValueError: two parameters are named 'w'" in said[0]
    for net in nets:
        assert_equals_local_training(net, data)
    assert took < SHARD_TIMEOUT / 2, f"took {took:.1f} s"


@pytest.mark.timeout(40)
def test_a_script_that_fits_again_after_the_refusal_trains_on_every_rank(tmp_path):
    """The documented flow through the Trainer: rank 0's fit fails before its setup (a resume
    with no checkpoint, where the chief alone looks), rank 1's fit is refused with it; each
    script catches its error and fits again (rank 0 without the resume). Both fits train an
    epoch together on the same shard, and the ranks end with the same parameters, moved from
    where they started."""
    data = {"x": np.arange(32.0).reshape(8, 4) / 32, "target": np.ones((8, 1))}
    with served(_shard()) as shard:

        def rank(r: int) -> tuple[list[np.ndarray], list[np.ndarray], BaseException]:
            if r == 0:
                _until("rank 1's job check", lambda: _in_a_gather(shard, 1))
            net = regression_net()
            start = [p.value.copy() for p in net.parameters()]
            sync = insecure_worker([shard.endpoint], r, 2, timeout=SHARD_TIMEOUT)
            trainer = Trainer(net, sync, 2, out_dir=tmp_path / "run", progress=False)
            try:
                try:
                    trainer.fit(data, epochs=1, resume=True)
                    raise AssertionError(f"rank {r}'s first fit did not fail")
                except Exception as exc:  # the script's own catch
                    failed = exc
                trainer.fit(data, epochs=1)
            finally:
                sync.close()
            return start, [p.value.copy() for p in net.parameters()], failed

        (start0, end0, failed), (_, end1, told) = run_ranks(rank, 2, SHARD_TIMEOUT + 20)
        assert shard.failed is None, shard.failed
    assert "CheckpointError" in type(failed).__name__, repr(failed)
    assert isinstance(told, JobRefused) and "rank 0 could not set up" in str(told), told
    for a, b in zip(end0, end1):  # rank 1 pulled rank 0's seed, and both took each step
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, s) for a, s in zip(end0, start0)), "nothing trained"


@pytest.mark.timeout(40)
def test_ranks_at_different_points_still_stop_at_once():
    """Each setup numbering its gathers from 1 hides no mismatch: the ranks meet, then rank 0
    sums metrics while rank 1 sets up again. Both stop at once, naming both gathers, well
    before the shard's timeout."""
    nets = [small_net() for _ in range(2)]
    with served(_shard()) as shard:

        def rank(r: int) -> str:
            net = nets[r]
            sync = insecure_worker([shard.endpoint], r, 2, timeout=SHARD_TIMEOUT)
            try:
                sync.setup(net.parameters())
                with pytest.raises(SyncError) as stopped:
                    if r == 0:
                        sync.allreduce_sum([1.0])
                    else:
                        _until("rank 0's sum", lambda: _in_a_gather(shard, 0))
                        sync.setup(net.parameters())
            finally:
                sync.close()
            return str(stopped.value)

        began = time.monotonic()
        said = run_ranks(rank, 2, timeout=SHARD_TIMEOUT + 20)
        took = time.monotonic() - began
    for words in said:
        assert "ranks are at different points of the job" in words, words
        assert "(allreduce:3)" in words and "(all_equal:1)" in words, words
    assert took < SHARD_TIMEOUT / 2, f"took {took:.1f} s"
