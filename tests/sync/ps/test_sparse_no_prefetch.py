"""A loop of one's own must prefetch a sparse table's rows in each step, through real shards.

A sync worker's reply carries only the rows it pushed, so its table is current only in the
rows it prefetched: a loop that never called ``sync.prefetch`` read rows other workers had
moved, and 2 workers trained silently wrong (23 values of one process's differed, on each
rank). Such a step's push is refused, before anything of the table is sent, naming the table
and the fix; with the prefetch the loop trains as one process. Rows prefetched just before
``start_step`` (since the step before ended) count for that step alone.
"""

from __future__ import annotations

import re
import threading

import numpy as np
import pytest
from ps_helpers import insecure_worker, run_ranks, sparse_table_net

from distconv.arg import Arg
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync

VOCAB, WIDTH, CLASSES, TABLE = 40, 4, 3, "embed.proj0.weight"
WORLD, STEPS, BATCH = 2, 4, 8
#: the refusal's way out, as the message words it
FIX = r"call sync\.prefetch\(network\.rows_needed\(batch\)\) after sync\.start_step"


def _words() -> list[np.ndarray]:
    """Each step's global batch of ids: many shared between the ranks' halves."""
    rng = np.random.default_rng(11)
    return [rng.integers(0, VOCAB, BATCH) for _ in range(STEPS)]


def _own_step(net, sync, words: np.ndarray, prefetch: bool) -> None:
    """One step of a loop of one's own on ``words`` (no Trainer), prefetching or not."""
    feed = {"words": Arg(ids=words, needs_grad=False), "label": Arg(ids=words % CLASSES)}
    sync.start_step(len(words))
    if prefetch:
        sync.prefetch(net.rows_needed(feed))
    net.forward(feed)
    net.backward(sync, loss="loss", loss_scale=len(words))
    sync.finish_step()


def _net():
    return sparse_table_net(VOCAB, WIDTH, CLASSES, seed=4)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.timeout(120)
def test_an_own_loop_without_prefetch_is_refused_naming_the_table_and_the_fix(shards, mode):
    endpoints = shards.start(2, workers=WORLD, mode=mode)

    def rank_fn(rank: int) -> str:
        net, sync = _net(), insecure_worker(endpoints, rank, WORLD, timeout=30, block_bytes=128)
        try:
            sync.setup(net.parameters())
            with pytest.raises(SyncError) as refused:
                _own_step(net, sync, _words()[0][rank::WORLD], prefetch=False)
            sync.abandon_step()  # as a loop must where its step raised
            return str(refused.value)
        finally:
            sync.close()

    for rank, said in enumerate(run_ranks(rank_fn, WORLD)):
        assert said.startswith(f"rank {rank}: {TABLE}: a gradient in "), said
        assert f"no sync.prefetch of {TABLE} in this step" in said, said
        assert re.search(FIX, said), said


@pytest.mark.timeout(120)
def test_the_refused_push_sends_nothing_and_an_empty_share_or_a_prefetch_before_goes(shards):
    """The table's push is refused before it leaves: no shard got a push. A rank that read no
    row (an empty share: ``fire_every_gradient`` hands a zero gradient over) prefetches
    nothing and pushes no row; rows prefetched just before ``start_step`` are current too."""
    endpoints = shards.start(2, workers=WORLD)
    rows = [np.array([3, 17, 30]), np.array([17, 31])]  # step 2's rank 0, step 3's rank 1
    counted = threading.Barrier(WORLD)  # no rank pushes again before both read the counts

    def rank_fn(rank: int) -> tuple[list[int], np.ndarray]:
        table = Parameter("t", np.zeros((VOCAB, WIDTH)))
        table.sparse_rows = True
        sync = insecure_worker(endpoints, rank, WORLD, timeout=30, block_bytes=8 * WIDTH * 8)
        try:
            sync.setup([table])
            sync.start_step(1)
            table.grad[rows[0]] = 1.0
            with pytest.raises(SyncError, match=f"rank {rank}: t: a gradient in 3 rows"):
                sync.on_gradient(table)
            sync.abandon_step()
            pushes = [s["pushes"] for s in sync.shard_stats()]
            counted.wait(timeout=60)
            table.grad[...] = 0.0
            for step in (0, 1):  # each rank reads rows in one step, none in the other
                mine = rows[step] if rank == step else None
                if mine is not None and rank == 1:
                    sync.prefetch({"t": mine})  # before the step
                sync.start_step(int(mine is not None))
                if mine is not None:
                    if rank == 0:
                        sync.prefetch({"t": mine})
                    table.grad[mine] = 1.0
                sync.on_gradient(table)
                sync.finish_step()
            sync.refresh_parameters()
            return pushes, table.value.copy()
        finally:
            sync.close()

    (pushes0, table0), (pushes1, table1) = run_ranks(rank_fn, WORLD)
    assert pushes0 == pushes1 == [0, 0]
    expected = np.zeros((VOCAB, WIDTH))
    for ids in rows:
        expected[ids] -= 0.05  # the default lr on a gradient of 1 over the step's 1 example
    np.testing.assert_allclose(table0, expected, rtol=1e-15)
    np.testing.assert_array_equal(table1, table0)


@pytest.mark.timeout(120)
def test_an_own_loop_with_prefetch_equals_one_process_on_every_rank(shards):
    ref = _net()
    local = LocalSync(create_optimizer("sgd", lr=0.05))
    local.setup(ref.parameters())
    for words in _words():
        _own_step(ref, local, words, prefetch=False)  # one process holds the table whole
    endpoints = shards.start(2, workers=WORLD)
    nets = [_net() for _ in range(WORLD)]

    def rank_fn(rank: int) -> None:
        sync = insecure_worker(endpoints, rank, WORLD, timeout=30, block_bytes=128)
        try:
            sync.setup(nets[rank].parameters())
            for words in _words():
                _own_step(nets[rank], sync, words[rank::WORLD], prefetch=True)
            sync.refresh_parameters()  # as the Trainer at an epoch's end: every row current
        finally:
            sync.close()

    run_ranks(rank_fn, WORLD)
    for rank, net in enumerate(nets):
        for p, q in zip(net.parameters(), ref.parameters()):
            np.testing.assert_allclose(
                p.value, q.value, rtol=1e-12, atol=1e-15, err_msg=f"rank {rank}: {p.name}"
            )
    moved = ref.parameters()[0].value != _net().parameters()[0].value
    assert moved.any(axis=1).sum() > VOCAB // 4  # the ranks shared rows the test reads


def _one_worker_table(shards, mode: str = "sync", *more: Parameter):
    """A worker alone on a real shard, set up with one sparse table ``t`` of zeros (and
    ``more``)."""
    (endpoint,) = shards.start(1, workers=1, mode=mode)
    table = Parameter("t", np.zeros((VOCAB, WIDTH)))
    table.sparse_rows = True
    sync = insecure_worker([endpoint], timeout=30)
    try:
        sync.setup([table, *more])
    except BaseException:
        sync.close()
        raise
    return table, sync


@pytest.mark.timeout(60)
def test_an_evaluations_rows_are_not_pushed_by_the_empty_share_after_it(shards):
    """Rows prefetched outside a step (an evaluation's) are pulled, not pushed: a share of no
    rows right after it pushes none of them (a lazy Adam moves a row pushed at gradient 0)."""
    table, sync = _one_worker_table(shards)

    def empty_share() -> int:
        """Bytes pushed by a step of no rows: fire_every_gradient's zero gradient."""
        before = sync.traffic()["bytes_pushed"]
        sync.start_step(0)
        sync.on_gradient(table)
        sync.finish_step()
        return sync.traffic()["bytes_pushed"] - before

    try:
        alone = empty_share()
        sync.prefetch({"t": np.arange(VOCAB)})  # every row, as an evaluation may read
        after_evaluation = empty_share()
    finally:
        sync.close()
    assert after_evaluation == alone  # headers alone: no row


@pytest.mark.timeout(60)
def test_an_evaluation_between_a_prefetch_and_its_step_keeps_the_batchs_rows(shards):
    """Rows prefetched before ``start_step`` and an evaluation's prefetched after them are
    all current at the step: the evaluation's did not replace the batch's, whose gradient
    was refused as read by a layer its rows_read missed."""
    table, sync = _one_worker_table(shards)
    try:
        sync.prefetch({"t": [3, 17]})  # the next batch's
        sync.prefetch({"t": [5]})  # an evaluation's, before that batch's step
        sync.start_step(1)
        table.grad[[3, 17]] = 1.0
        sync.on_gradient(table)
        sync.finish_step()
    finally:
        sync.close()
    expected = np.zeros((VOCAB, WIDTH))
    expected[[3, 17]] = -0.05  # the default lr on a gradient of 1 over the step's 1 example
    np.testing.assert_array_equal(table.value, expected)


@pytest.mark.timeout(60)
def test_a_first_pass_prefetched_before_the_step_and_the_next_in_it_both_train(shards):
    """Gradients accumulated over two passes: the first pass's rows prefetched before
    ``start_step``, the second's in the step. Both are current; the first's gradient was
    refused as read by a layer whose rows_read missed them, since the step's own prefetch
    hid those before it."""
    table, sync = _one_worker_table(shards)
    try:
        sync.prefetch({"t": [3]})  # the first pass's
        sync.start_step(2)
        sync.prefetch({"t": [5]})  # the second pass's
        table.grad[[3, 5]] = 1.0
        sync.on_gradient(table)
        sync.finish_step()
    finally:
        sync.close()
    expected = np.zeros((VOCAB, WIDTH))
    expected[[3, 5]] = -0.05 / 2  # the default lr on a gradient of 1 over the step's 2 examples
    np.testing.assert_array_equal(table.value, expected)


@pytest.mark.timeout(60)
def test_a_prefetch_before_the_step_of_another_batch_is_refused_naming_it(shards):
    """The rows prefetched before ``start_step`` are those of the step before: the refusal
    names the rank and that prefetch, not a layer whose rows_read misses rows."""
    table, sync = _one_worker_table(shards)
    try:
        sync.start_step(1)
        sync.prefetch({"t": [3, 17]})
        table.grad[[3, 17]] = 1.0
        sync.on_gradient(table)
        sync.finish_step()
        sync.prefetch({"t": [3, 17]})  # the last batch's rows again, not this one's
        sync.start_step(1)
        table.grad[[3, 30]] = 1.0
        with pytest.raises(SyncError) as refused:
            sync.on_gradient(table)
        sync.abandon_step()
    finally:
        sync.close()
    assert str(refused.value) == (
        "rank 0: t: rows [30] have gradients but were prefetched neither in this step nor "
        "since the step before (1 in all): the prefetch before sync.start_step was of another "
        "batch; prefetch the rows this step's forward reads"
    )


def _a_failed_finish(shards):
    """A worker alone on a real async shard, past a step whose finish_step raised: the shard
    refused the push of a NaN in ``d`` and serves on. Rows [3] of ``t`` were prefetched before
    that step; both gradients are cleared for the next."""
    dense = Parameter("d", np.zeros(3))
    table, sync = _one_worker_table(shards, "async", dense)
    try:
        sync.prefetch({"t": [3]})
        sync.start_step(1)
        table.grad[3], dense.grad[...] = 1.0, np.nan
        sync.on_gradient(table)
        sync.on_gradient(dense)
        with pytest.raises(SyncError, match="gradient of parameter d from rank 0 is not finite"):
            sync.finish_step()
    except BaseException:
        sync.close()
        raise
    table.grad[...], dense.grad[...] = 0.0, 0.0
    return table, dense, sync


@pytest.mark.timeout(60)
def test_rows_prefetched_before_a_step_whose_finish_failed_count_for_no_later_step(shards):
    """An async shard refuses a push of a NaN and serves on; a loop that goes on past that
    finish_step without abandon_step had its next step's gradient pushed on the rows
    prefetched before the failed step, though other workers may have moved them since."""
    table, _, sync = _a_failed_finish(shards)
    try:
        table.grad[3] = 1.0
        sync.start_step(1)  # no prefetch since the step before
        with pytest.raises(SyncError, match="rank 0: t: a gradient in 1 row, but no sync"):
            sync.on_gradient(table)
        sync.abandon_step()
    finally:
        sync.close()


@pytest.mark.parametrize("abandon", [False, True])
@pytest.mark.timeout(60)
def test_rows_prefetched_after_a_failed_finish_count_for_the_next_step(shards, abandon):
    """The step ended at its finish_step that raised: rows prefetched after it, before the next
    ``start_step``, are the next step's, not that failed step's (whose record the next
    start_step clears), which refused the gradient as if nothing had been prefetched. An
    ``abandon_step`` after that prefetch (the contract's call once finish_step raised) ends no
    step, and forgot those rows too."""
    table, dense, sync = _a_failed_finish(shards)
    try:
        sync.prefetch({"t": [5]})  # the next batch's, before its step
        if abandon:
            sync.abandon_step()  # ends no step (the failed finish did): the rows stay
        sync.start_step(1)
        table.grad[5] = 1.0
        sync.on_gradient(table)
        sync.on_gradient(dense)
        sync.finish_step()
    finally:
        sync.close()
    expected = np.zeros((VOCAB, WIDTH))
    expected[3] = expected[5] = -0.05  # row 3 from the failed step: the shard applied t's push
    np.testing.assert_array_equal(table.value, expected)
