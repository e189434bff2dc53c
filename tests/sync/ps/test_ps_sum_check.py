"""The sync NaN/Inf check runs on the ranks' sum of each block: once per block and step, not once
per rank's part. Every parameter a push completes is summed and checked before any of them is
updated, so a bad part fails the job with nothing of that push updated; each request the failure
answers counts in ``errors``; the error names a rank only where its part is proven to hold the
NaN or Inf. An in-process shard on real sockets, so that its blocks, counters and checks can be
looked at; the workers are real clients. Also: the check's dtypes, and that only the sums and
the check are kept quiet about overflows (the optimizer still warns)."""

from __future__ import annotations

import re
import time
import tracemalloc
import warnings

import numpy as np
import pytest
import zmq
from hand_shard import BLOCKS, ROWS
from ps_helpers import run_ranks, served, small_net, sparse_table_net

from distconv import backend
from distconv.backend import DOT_CHECK_SIZE, all_finite
from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.ps import server, state
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard
from distconv.sync.ps.sums import diverged_message
from distconv.sync.ps.wire import unpack_header

BAD = 2  # the dense parameter whose gradient goes wrong (conv2.weight, 3 blocks)
TABLE = 0  # the sparse table of sparse_table_net (64 rows, 2 per block)
INF_OR_OVERFLOW = "rank 0's part holds Inf, or the ranks' finite parts overflowed"
#: a dense sum's note where rank 0's part, the frame the sum ran in, is gone
UNCHECKED = "; rank 0's part, summed into, could not be checked"


def _step(shard: Shard, make_net, grads) -> list[tuple[str | None, dict[int, np.ndarray]]]:
    """Two workers run one sync step of ``make_net()`` through ``shard``, ``grads(rank, i,
    grad)`` filling parameter i's gradient; per rank: the step's error (None if it went through)
    and, from rank 0, the values of the shard's blocks before the step."""

    def rank_fn(rank: int):
        net = make_net()
        sync = PServerSync(
            create_optimizer("sgd", lr=0.05),
            rank=rank,
            world_size=2,
            pservers=[shard.endpoint],
            insecure=True,
            timeout=20,
            block_bytes=64,
        )
        try:
            sync.setup(net.parameters())
            # nothing changes before rank 0 pushes: every update needs both ranks' parts
            before = {b: blk.value.copy() for b, blk in shard.blocks.items()} if rank == 0 else {}
            sync.start_step(4)
            for i, param in enumerate(net.parameters()):
                param.grad[...] = 0.0
                grads(rank, i, param.grad)
                if param.sparse_rows:  # the rows a step pushes are those it prefetched
                    sync.prefetch({param.name: np.flatnonzero(param.grad.any(axis=1))})
                sync.on_gradient(param)
            try:
                sync.finish_step()
            except SyncError as exc:
                return str(exc), before
            return None, before
        finally:
            sync.close()

    return run_ranks(rank_fn, 2, timeout=60)


@pytest.fixture
def shard(monkeypatch):
    """A 2-worker sync shard serving in a thread; ``shard.replied`` lists its replies' ops."""
    shard = Shard(ShardConfig(bind="127.0.0.1:0", workers=2, insecure=True, timeout=30))
    shard.replied = []
    real_send = server.send

    def record(sock, frames, **kwargs):
        shard.replied.append(unpack_header(frames[0], request=False)["op"])
        return real_send(sock, frames, **kwargs)

    monkeypatch.setattr(server, "send", record)
    with served(shard):
        yield shard


def _settled(shard: Shard, seconds: float = 10.0) -> None:
    """Wait until both ranks said bye: it follows their pushes on the same socket, so every
    request they sent has been handled and the shard's counters are final."""
    deadline = time.monotonic() + seconds
    while not shard.left >= {0, 1}:
        assert time.monotonic() < deadline, f"ranks still connected: left {shard.left}"
        time.sleep(0.01)


def _assert_failed_with_nothing_updated(shard: Shard, results, expect: str) -> None:
    """The job failed with exactly ``expect``, told to both ranks, and no block of any
    parameter moved: the bad push also carried the parameters the step completed before it."""
    assert shard.failed == expect
    for message, _ in results:
        assert message is not None and expect in message, message
    before = results[0][1]
    for bid, block in shard.blocks.items():
        assert block.version == 0, (bid, shard.params[block.param].name)
        np.testing.assert_array_equal(block.value, before[bid])


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("bad_ranks", "bad", "found"),
    [
        ({1}, np.nan, "rank 1's part is not finite" + UNCHECKED),
        ({1}, np.inf, "rank 1's part is not finite" + UNCHECKED),
        # summed into, but only a NaN in rank 0's part makes a NaN
        ({0}, np.nan, "rank 0's part holds a NaN"),
        # rank 1's proven; rank 0's part, summed into, cannot be told
        ({0, 1}, np.nan, "rank 1's part is not finite" + UNCHECKED),
        ({0}, -np.inf, INF_OR_OVERFLOW),  # an Inf in rank 0's part looks like an overflow
        ({0, 1}, 1e308, INF_OR_OVERFLOW),  # both finite, their sum overflows
    ],
)
def test_a_bad_dense_part_fails_the_step_as_diverged_naming_proven_ranks_with_nothing_updated(
    shard, bad_ranks, bad, found
):
    def grads(rank, i, grad):
        grad[...] = 0.5
        if i == BAD and rank in bad_ranks:
            grad.flat[-1] = bad  # in the parameter's last block

    results = _step(shard, small_net, grads)
    name = shard.params[BAD].name
    assert len(shard.by_param[BAD]) > 1
    expect = diverged_message(name, found, 1)
    _assert_failed_with_nothing_updated(shard, results, expect)
    # both ranks' pushes were answered by the failure: each is a request answered with an error
    assert shard.stats.errors == shard.replied.count("error") == 2
    assert shard.stats.updates == 0


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    ("bad_ranks", "bad", "found"),
    [
        ({1}, np.nan, "rank 1's part is not finite"),
        # sparse parts stay intact: each bad one is named
        ({0, 1}, -np.inf, "the parts of ranks 0 and 1 are not finite"),
        ({0, 1}, 1e308, "the ranks' finite parts overflowed when added"),  # both finite
    ],
)
def test_a_bad_sparse_part_fails_the_step_as_diverged_naming_each_bad_rank_nothing_updated(
    shard, bad_ranks, bad, found
):
    def grads(rank, i, grad):
        if i != TABLE:
            grad[...] = 0.5
            return
        grad[[rank, 10 + rank, 63]] = 0.5  # rows touched (the last in the last block)
        if rank in bad_ranks:
            grad[63, -1] = bad

    results = _step(shard, lambda: sparse_table_net(64, 4, 3), grads)
    name = shard.params[TABLE].name
    assert shard.params[TABLE].sparse and len(shard.by_param[TABLE]) > 1
    expect = diverged_message(name, found, 1)
    _assert_failed_with_nothing_updated(shard, results, expect)
    _settled(shard)
    # the pushes held when the job failed, and any that came after (the dense ones, unless a
    # client stopped on the first error), were each answered with an error and counted
    assert shard.stats.errors == shard.replied.count("error") >= 2


@pytest.mark.timeout(90)
def test_each_block_is_checked_once_per_sync_step_on_the_sum(shard, monkeypatch):
    calls = []

    def counting(grad):
        calls.append(grad.shape)
        return all_finite(grad)

    monkeypatch.setattr(state, "all_finite", counting)  # the one the shard calls in both modes

    def grads(rank, i, grad):
        grad[...] = rank + 1.0

    results = _step(shard, small_net, grads)
    assert [message for message, _ in results] == [None, None]
    assert len(calls) == len(shard.blocks)  # 2 ranks, one check each block
    assert all(b.version == 1 for b in shard.blocks.values())
    assert shard.stats.errors == shard.replied.count("error") == 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_optimizer_still_warns_of_an_overflow_the_check_does_not(hand, mode):
    h = hand(mode=mode, max_staleness=10)
    h.seed()  # w = 0; sgd, lr 1, 1 example: w - g
    huge = [np.full((ROWS, 1), -1e308)] * BLOCKS  # finite; the check's dot product overflows
    head = {"op": "push", "count": 1, "lr": 1.0, "params": [0], "blocks": list(range(BLOCKS))}
    for step, expect in ((1, 1e308), (2, np.inf)):  # step 2: 1e308 + 1e308 overflows
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            reply, (values,) = h.ask({**head, "step": step, "versions": [step - 1] * BLOCKS}, huge)
        assert reply["op"] == "ok", reply
        np.testing.assert_array_equal(values.view(np.float64), expect)
        said = {str(w.message) for w in caught}
        # step 1: the check's overflowing dot is silent; step 2: the optimizer's warns, once
        # per block (errors there are the user's to see: a learning rate too large ...)
        assert said == ({"overflow encountered in subtract"} if step == 2 else set()), said


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_finite_through_the_dot_product_is_exact(dtype):
    g = np.ones((DOT_CHECK_SIZE // 4, 4), dtype)
    assert all_finite(g)
    g[7, 1] = np.finfo(dtype).max  # the dot overflows: the exact test says finite
    g[9, 2] = -np.finfo(dtype).max
    with np.errstate(over="ignore"):  # as the shard calls it
        assert all_finite(g)
        for bad in (np.nan, np.inf, -np.inf):
            g[DOT_CHECK_SIZE // 4 - 1, 3] = bad
            assert not all_finite(g)


@pytest.fixture
def dots(monkeypatch):
    """The dtypes ``all_finite`` took the dot product of, in order."""
    seen = []
    real = backend._dot

    def spy(a, b):
        seen.append(a.dtype)
        return real(a, b)

    monkeypatch.setattr(backend, "_dot", spy)
    return seen


def test_only_contiguous_float32_takes_the_dot_product(dots):
    """Not float64: OpenBLAS runs ddot on every core it may, and where processes share the
    cores (two ranks, a rank and a shard) one check of 512 K took 0.4-8 ms against 0.1-0.2 ms
    for isfinite; sdot stays on one thread."""
    n = DOT_CHECK_SIZE
    assert all_finite(np.ones(n, np.float32)) and all_finite(np.ones(n, np.float64))
    assert dots == [np.float32]
    wide = np.ones(n)
    wide[-1] = np.inf
    assert not all_finite(wide)
    half = np.full(n, 60000.0, np.float16)  # its dot would overflow float16
    assert all_finite(half)
    half[-1] = np.nan
    assert not all_finite(half)
    strided = np.ones((n, 4))[:, :2]  # flattening it for a dot would copy it
    assert all_finite(strided)
    strided[-1, -1] = np.inf
    assert not all_finite(strided)
    assert not all_finite(np.asfortranarray(np.full((n // 8, 8), np.nan)))
    assert dots == [np.float32]  # none of the others took it


def test_a_strided_gradient_is_checked_without_a_copy():
    g = np.ones((DOT_CHECK_SIZE * 4, 4))[:, :2]  # flattening it would copy it
    tracemalloc.start()
    try:
        assert all_finite(g)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < g.nbytes // 2  # isfinite's booleans (1/8 of it), not a copy of it


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.float16, np.longdouble])
def test_finite_checks_every_floating_kind(dtype):
    g = np.ones(DOT_CHECK_SIZE, dtype)
    assert all_finite(g)
    g[-1] = np.nan
    assert not all_finite(g)
    g[-1] = np.inf
    assert not all_finite(g)


def test_finite_checks_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    g = np.ones(DOT_CHECK_SIZE, ml_dtypes.bfloat16)
    assert all_finite(g)
    g[-1] = np.nan
    assert not all_finite(g)


def test_integers_are_finite_and_other_dtypes_are_refused():
    assert all_finite(np.arange(DOT_CHECK_SIZE, dtype=np.int64))
    assert all_finite(np.zeros(3, np.uint8)) and all_finite(np.zeros(3, bool))
    for odd in (
        np.array([1.0, None], dtype=object),
        np.zeros(3, dtype=[("a", "f8")]),
        np.zeros(3, dtype="datetime64[s]"),
    ):
        with pytest.raises(TypeError, match=re.escape(f"cannot check a {odd.dtype} array")):
            all_finite(odd)


def _dense_push(rank: int, params: list[int], arrays: list, step: int = 1) -> tuple[dict, list]:
    """A hand-made dense push of the hand shard's parameters (0: w, 4 blocks; 1: t, 1)."""
    blocks = [b for p in params for b in ([0, 1, 2, 3] if p == 0 else [4])]
    head = {"op": "push", "count": 1, "lr": 1.0, "step": step, "rank": rank}
    return {**head, "params": params, "blocks": blocks, "versions": [0] * len(blocks)}, arrays


def _replies(h, expect: int) -> list[str]:
    """The ops of the ``expect`` replies the shard sent since the last call (or the seed). The
    hand shard handles each request before ``send`` returns, and records every reply it makes,
    so counting them there proves that no request was answered twice or left unanswered."""
    done = getattr(h, "replies_read", 3)  # the seed's three parts were read by ask
    assert len(h.sent) - done == expect, f"{len(h.sent) - done} replies, expected {expect}"
    h.replies_read = done + expect
    return [h.read()[0]["op"] for _ in range(expect)]


@pytest.mark.timeout(60)
def test_a_parameter_an_earlier_push_completed_stays_updated_when_a_later_push_fails(hand):
    """Workers group parameters differently: rank 0 pushes {w, t}, rank 1 {w} then {t}. w is
    complete (and finite) after rank 1's first push and is updated then; t's NaN (in rank 0's
    part) fails the job at rank 1's second push, with t not updated. Both pushes still held
    are answered with the error, once each, and counted."""
    h = hand(workers=2)
    h.seed()
    w = [np.full((ROWS, 1), 0.5)] * BLOCKS
    t_bad = np.zeros((2048, 40))
    t_bad[-1, -1] = np.nan
    h.send(*_dense_push(0, [0, 1], [*w, t_bad]))
    h.send(*_dense_push(1, [0], w))
    assert _replies(h, 1) == ["ok"]  # rank 1's {w}: its only parameter is updated
    assert [h.shard.blocks[b].version for b in range(5)] == [1, 1, 1, 1, 0]
    h.send(*_dense_push(1, [1], [np.zeros((2048, 40))]))
    assert _replies(h, 2) == ["error", "error"]  # rank 0's {w, t} and rank 1's {t}
    # proven: rank 1's part is finite, so the NaN came from rank 0's
    assert h.shard.failed == diverged_message("t", "rank 0's part holds a NaN", 1)
    assert [h.shard.blocks[b].version for b in range(5)] == [1, 1, 1, 1, 0]
    assert h.shard.stats.errors == 2


@pytest.mark.timeout(60)
def test_a_reply_that_fails_answers_each_push_once(hand, monkeypatch):
    """Two ranks complete w; the first reply goes out, building the second fails (a shard
    bug): the job fails, and only the push still unanswered gets the error, once."""
    h = hand(workers=2)
    h.seed()
    real_values, calls = h.shard._values, []

    def second_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("no reply for you")
        return real_values(*args, **kwargs)

    monkeypatch.setattr(h.shard, "_values", second_fails)
    w = [np.full((ROWS, 1), 0.5)] * BLOCKS
    h.send(*_dense_push(0, [0], w))
    h.send(*_dense_push(1, [0], w))
    assert _replies(h, 2) == ["ok", "error"]
    assert "no reply for you" in h.shard.failed
    assert h.shard.stats.errors == 1


@pytest.mark.timeout(60)
def test_a_reply_that_fails_leaves_a_push_held_under_another_parameter_to_the_failure(
    hand, monkeypatch
):
    """Rank 0 pushes {w, t}, rank 1 {w}: w completes, and building rank 1's reply fails. Rank
    0's push, still held under t, and rank 1's get the failure once each."""
    h = hand(workers=2)
    h.seed()

    def broken(*args, **kwargs):
        raise RuntimeError("no reply for you")

    monkeypatch.setattr(h.shard, "_values", broken)
    w = [np.full((ROWS, 1), 0.5)] * BLOCKS
    h.send(*_dense_push(0, [0, 1], [*w, np.zeros((2048, 40))]))
    h.send(*_dense_push(1, [0], w))
    assert _replies(h, 2) == ["error", "error"]
    assert h.shard.failed.startswith("reply of parameter w at step 1 failed")
    assert h.shard.stats.errors == 2 and not h.shard.waiting


@pytest.mark.timeout(60)
def test_an_error_reply_that_cannot_go_does_not_keep_the_failure_from_the_others(hand, monkeypatch):
    h = hand(workers=2)
    h.seed()
    real_reply, failed_once = h.shard._reply, []

    def first_error_fails(ident, header, *args, **kwargs):
        if "error" in kwargs and not failed_once:
            failed_once.append(header["rank"])
            raise zmq.ZMQError(zmq.EHOSTUNREACH)
        return real_reply(ident, header, *args, **kwargs)

    monkeypatch.setattr(h.shard, "_reply", first_error_fails)
    w_bad = [np.full((ROWS, 1), 0.5)] * (BLOCKS - 1) + [np.full((ROWS, 1), np.nan)]
    h.send(*_dense_push(0, [0], [np.full((ROWS, 1), 0.5)] * BLOCKS))
    h.send(*_dense_push(1, [0], w_bad))
    assert failed_once and _replies(h, 1) == ["error"]  # the other rank still hears of it
    assert h.shard.failed == diverged_message("w", "rank 1's part is not finite" + UNCHECKED, 1)
    assert h.shard.stats.errors == 2 and not h.shard.waiting


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("method", "what"), [("_sums", "sum"), ("_not_finite", "NaN/Inf check"), ("_update", "update")]
)
def test_a_failure_names_what_failed_and_the_parameter(hand, monkeypatch, method, what):
    h = hand(workers=2)
    h.seed()

    def broken(*args, **kwargs):
        raise RuntimeError("broken")

    monkeypatch.setattr(h.shard, method, broken)
    w = [np.full((ROWS, 1), 0.5)] * BLOCKS
    h.send(*_dense_push(0, [0], w))
    h.send(*_dense_push(1, [0], w))
    assert _replies(h, 2) == ["error", "error"]
    assert h.shard.failed.startswith(f"{what} of parameter w at step 1 failed"), h.shard.failed


@pytest.mark.timeout(60)
def test_update_seconds_holds_the_sums_and_not_the_check(hand, monkeypatch):
    """The benchmark subtracts ``update_seconds`` as optimizer time: the NaN/Inf check must
    stay out of it. A clock that jumps only inside the check tells, without timing anything."""
    h = hand(workers=2)
    h.seed()
    now = [0.0]
    monkeypatch.setattr(state, "_clock", lambda: now[0])
    real_finite, real_sum = state.all_finite, state.sum_in_rank_order

    def slow_check(grad):
        now[0] += 1000.0  # a check of 1000 s on the fake clock
        return real_finite(grad)

    def slow_sum(parts):
        now[0] += 1.0  # and a sum of 1 s
        return real_sum(parts)

    monkeypatch.setattr(state, "all_finite", slow_check)
    monkeypatch.setattr(state, "sum_in_rank_order", slow_sum)
    w = [np.full((ROWS, 1), 0.5)] * BLOCKS
    h.send(*_dense_push(0, [0], w))
    h.send(*_dense_push(1, [0], w))
    assert _replies(h, 2) == ["ok", "ok"]
    assert [h.shard.blocks[b].version for b in range(BLOCKS)] == [1] * BLOCKS
    assert now[0] == 1001.0 * BLOCKS  # the sum and the check ran, once a block each
    assert h.shard.stats.update_seconds == 1.0 * BLOCKS  # the sums' time, none of the check's
