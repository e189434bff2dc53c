"""Coalesced pushes (protocol 2): several parameters' gradients in one message, real shards."""

from __future__ import annotations

import numpy as np
import pytest
import zmq
from ps_helpers import (
    assert_equals_local_training,
    batches,
    insecure_worker,
    raw_dealer,
    run_ranks,
    small_net,
    train_steps,
)

from distconv.arg import Arg
from distconv.optim import create_optimizer, mean_scale
from distconv.sync.ps.blocks import Layout, ParamSpec
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.outbox import PUSH_BYTES
from distconv.sync.ps.wire import pack, unpack_header

STEPS, BATCH = 3, 8


def _train(endpoints, data, push_bytes, world=1):
    """Train ``small_net`` on ``data`` with ``world`` workers, rank r using ``push_bytes[r]``;
    returns rank 0's weights, every rank's push message count and the shards' stats."""
    nets = [small_net(seed=rank) for rank in range(world)]

    def rank_fn(rank: int):
        sync = insecure_worker(endpoints, rank, world)
        sync.push_bytes = push_bytes[rank]
        try:
            sync.setup(nets[rank].parameters())
            train_steps(nets[rank], sync, data, rank, world)
            return sync.push_messages, sync.shard_stats()
        finally:
            sync.close()

    results = run_ranks(rank_fn, world)
    return nets[0], [m for m, _ in results], results[0][1]


def test_a_burst_of_gradients_goes_as_one_push_per_shard_and_equals_one_process(shards):
    data = batches(STEPS, BATCH)
    endpoints = shards.start(2, workers=1)
    net, (messages,), stats = _train(endpoints, data, [1 << 20])
    assert_equals_local_training(net, data)
    # 8 parameters in 64-byte blocks over 2 shards; each step's gradients (well under 1 MiB)
    # leave together at finish_step: one message per shard and step
    assert messages == 2 * STEPS
    assert [s["push_messages"] for s in stats] == [STEPS, STEPS]
    held = [len({b.param for b in blocks}) for blocks in _blocks_by_shard(endpoints)]
    assert [s["pushes"] for s in stats] == [n * STEPS for n in held]
    assert all(n > 1 for n in held)


def _blocks_by_shard(endpoints):
    """The blocks each shard holds of ``small_net`` in 64-byte blocks (the block rule)."""
    specs = [ParamSpec(p.name, p.shape, "float64") for p in small_net().parameters()]
    layout = Layout(specs, len(endpoints), 64)
    return [layout.blocks_on(s) for s in range(len(endpoints))]


def test_workers_grouping_gradients_differently_give_the_rank_order_sum_bit_for_bit(shards):
    """Ranks 0 and 2 send each step's gradients in one message per shard, rank 1 each gradient
    on its own when the link is free: the shards still sum each parameter in rank order. Three
    ranks, since with two a + b == b + a whatever the order."""
    data = batches(STEPS, 9)
    endpoints = shards.start(2, workers=3)
    net, (m0, m1, m2), _ = _train(endpoints, data, [1 << 20, 0, 1 << 20], world=3)
    assert m0 == m2 == 2 * STEPS and m1 > m0
    assert_equals_local_training(net, data)
    ranked, reverse = _sync_sgd(data, 3), _sync_sgd(data, 3, order=[2, 1, 0])
    assert any((a != b).any() for a, b in zip(ranked, reverse))  # the order shows in the bits
    for p, expected in zip(net.parameters(), ranked):
        np.testing.assert_array_equal(p.value, expected)


def _sync_sgd(data, world: int, order=None, lr: float = 0.05) -> list[np.ndarray]:
    """``small_net``'s weights after sync SGD on ``data`` done by hand, as the protocol says:
    per step each rank's gradient sums, added in ``order`` (rank order by default), then one
    SGD step with ``grad_scale`` 1 / the step's example count (the optimizer folds the mean,
    as a single process does)."""
    net, order = small_net(), order or list(range(world))
    sgd = create_optimizer("sgd", lr=lr)
    for x, y in data:
        sums = []
        for rank in range(world):
            for p in net.parameters():
                p.grad[...] = 0
            ys = y[rank::world]
            inputs = {"image": Arg(x[rank::world], needs_grad=False), "label": Arg(ids=ys)}
            net.forward(inputs)
            net.backward(lambda p: None, loss="loss", loss_scale=len(ys))
            sums.append([p.grad.copy() for p in net.parameters()])
        for i, p in enumerate(net.parameters()):
            grad = sums[order[0]][i].copy()
            for rank in order[1:]:
                grad += sums[rank][i]
            sgd.update(p.value, grad, {}, grad_scale=mean_scale(len(y)))
    return [p.value for p in net.parameters()]


def _bad_pushes(table: dict[int, list[int]]) -> list[tuple[str, dict, list[np.ndarray]]]:
    """Pushes whose first parameter is well formed and whose whole is not, with the error
    each must get. ``table``: parameter -> its block ids on the shard (64-byte float64
    blocks: 8 rows each, or fewer in a parameter's last blocks)."""
    (p, bp), (q, bq) = list(table.items())[:2]
    good = [np.ones((8, 1)) for _ in bp]

    def rows(n):
        return [np.ones((8, 1)) for _ in range(n)]

    head = {"op": "push", "id": 9, "job": "local", "rank": 0, "step": 1, "count": 1, "lr": 0.1}
    return [
        ("repeat", {**head, "params": [p, p], "blocks": bp + bp, "versions": [0] * 2 * len(bp)},
         good + good),
        ("this shard holds", {**head, "params": [p, q], "blocks": bp + bq[:-1],
                              "versions": [0] * (len(bp) + len(bq) - 1)},
         good + rows(len(bq) - 1)),
        ("versions for", {**head, "params": [p, q], "blocks": bp + bq, "versions": [0]},
         good + rows(len(bq))),
        ("arrays for", {**head, "params": [p, q], "blocks": bp + bq,
                        "versions": [0] * (len(bp) + len(bq))}, good),
        ("must carry one", {**head, "params": [p, q], "blocks": bp + bq, "rows": [1] * 3,
                            "versions": [0] * (len(bp) + len(bq))}, good + rows(len(bq))),
        ("expected float64", {**head, "params": [p, q], "blocks": bp + bq,
                              "versions": [0] * (len(bp) + len(bq))},
         good + [np.ones((8, 1), np.float32) for _ in bq]),
        ("not finite", {**head, "params": [p, q], "blocks": bp + bq,
                        "versions": [0] * (len(bp) + len(bq))},
         good + [np.full((8, 1), np.nan) for _ in bq]),
    ]  # fmt: skip


@pytest.mark.timeout(120)
def test_a_malformed_coalesced_push_is_refused_whole_and_the_shard_serves_on(shards):
    endpoint = shards.start(1, workers=1, mode="async")[0]
    net = small_net()
    sync: PServerSync = insecure_worker([endpoint])
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)
    try:
        sync.setup(net.parameters())
        # two parameters whose blocks are all 8 rows (64 bytes of float64) long
        table = {
            i: [b.id for b in sync.layout.blocks_on(0, i)]
            for i, p in enumerate(net.parameters())
            if p.value.size % 8 == 0
        }
        assert len(table) >= 2
        for cause, header, arrays in _bad_pushes(table):
            raw.send_multipart(pack(header, arrays))
            assert raw.poll(10_000), cause
            reply = unpack_header(raw.recv_multipart()[0], request=False)
            assert reply["op"] == "error" and cause in reply["error"], (cause, reply)
        stats = sync.shard_stats()[0]
        assert stats["updates"] == 0 and stats["pushes"] == 0  # nothing of them was kept
        assert stats["errors"] == len(_bad_pushes(table))
        data = batches(STEPS, BATCH)
        train_steps(net, sync, data)  # async with one worker is plain SGD
    finally:
        sync.close()
        raw.close(0)
        ctx.term()
    assert_equals_local_training(net, data)


def test_coalesced_pushes_are_cut_at_the_shards_message_cap(shards):
    # small_net holds 1752 bytes of float64; fc1.weight alone is 768 of them
    (endpoint,) = shards.start(1, workers=1, extra=["--max-message-bytes", "1024"])
    data = batches(STEPS, BATCH)
    net, (messages,), (stats,) = _train([endpoint], data, [1 << 20])
    assert_equals_local_training(net, data)
    assert messages >= 2 * STEPS and stats["push_messages"] == messages
    assert stats["errors"] == 0  # no push exceeded the cap


def test_push_kb_on_the_command_line_reaches_the_client(shards):
    from distconv.cli import build_parser
    from distconv.distributed import build_sync
    from distconv.optim import SGD
    from distconv.runtime import detect_runtime
    from distconv.transport_flags import sync_options

    endpoints = shards.start(1, workers=1)
    args = build_parser().parse_args(["train", "--push-kb", "0", "--insecure"])
    runtime = detect_runtime({"pservers": ",".join(endpoints)}, environ={})
    sync = build_sync("pserver", SGD(0.1), runtime, sync_options(args))
    try:
        assert sync.push_bytes == 0
    finally:
        sync.close()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--push-kb", "-1"])


def test_the_end_of_a_step_cuts_each_queue_at_push_bytes_and_the_shards_take_turns():
    """What is still queued at finish_step leaves as if each message had gone when it filled
    up (at least push_bytes; the last of a shard: what is left), shard 0 and 1 alternating."""
    sync = insecure_worker(["127.0.0.1:1", "127.0.0.1:2"])  # nothing is sent here
    sent = []
    sync._send_items = lambda shard, items: sent.append((shard, [p for p, _, _ in items]))
    try:
        sync.push_bytes = 100
        for shard, sizes in ((0, [60, 60, 10, 200, 5]), (1, [100, 1])):
            sync._queued[shard] = [(p, [], [np.zeros(n, np.uint8)]) for p, n in enumerate(sizes)]
        sync._flush_pushes()
        assert sent == [(0, [0, 1]), (1, [0]), (0, [2, 3]), (1, [1]), (0, [4])]
        assert sync._queued == [[], []] and sync._queued_bytes == [0, 0]
        sent.clear()
        sync.push_bytes = 0  # "each gradient while the link is free": not one message each
        half = PUSH_BYTES // 2  # here, where the default size cuts the queue
        sync._queued[0] = [(p, [], [np.zeros(half, np.uint8)]) for p in range(3)]
        sync._flush_pushes()
        assert sent == [(0, [0, 1]), (0, [2])]
    finally:
        sync.close()
