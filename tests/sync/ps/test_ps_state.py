"""The shard's per-block arithmetic, which runs in place in the received frames: the same
bits as the plain rank-order sum, no copy when none is needed, and the mean folded into the
optimizer's ``grad_scale`` as a single process folds it; and the header's exact type checks."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from distconv.optim import create_optimizer, mean_scale
from distconv.sync.ps.sums import all_finite, sum_in_rank_order
from distconv.sync.ps.wire import WireError, pack, unpack_header


def _frames(*arrays, writable=True):
    """Arrays as a shard receives them: views of message buffers (writable, as zmq's are)."""
    out = []
    for a in arrays:
        buf = bytearray(a.tobytes()) if writable else a.tobytes()
        out.append(np.frombuffer(buf, a.dtype).reshape(a.shape))
    return out


@pytest.mark.parametrize("writable", [True, False])
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_the_sum_in_place_has_the_bits_of_the_plain_formula(writable, ranks):
    rng = np.random.default_rng(ranks)
    grads = [rng.standard_normal((257, 1)).astype(np.float32) for _ in range(ranks)]
    expect = grads[0].copy()
    for g in grads[1:]:
        expect = expect + g
    rows, got = sum_in_rank_order([(None, g) for g in _frames(*grads, writable=writable)])
    assert rows is None
    np.testing.assert_array_equal(got, expect)


@pytest.mark.parametrize("name", ["sgd", "momentum", "adam"])
def test_the_folded_mean_is_the_single_process_update(name):
    """The shard's definition of a step: the rank-order sum, then the optimizer with
    ``grad_scale = mean_scale(examples)``, the very call a single process (LocalSync) makes;
    within an ulp or two of dividing first, and bitwise for a power of two."""
    rng = np.random.default_rng(1)
    value = rng.standard_normal((33, 1))
    grads = _frames(*(rng.standard_normal((33, 1)) for _ in range(2)))
    _, total = sum_in_rank_order([(None, g) for g in grads])
    for examples, exact in ((7, False), (8, True)):
        opt = create_optimizer(name, lr=0.1)
        folded, divided = value.copy(), value.copy()
        opt.update(folded, total, opt.init_state(value), grad_scale=mean_scale(examples))
        opt.update(divided, total / examples, opt.init_state(value))
        if exact:
            np.testing.assert_array_equal(folded, divided)
        else:
            np.testing.assert_allclose(folded, divided, rtol=1e-14, atol=1e-15)


def test_one_rank_takes_no_copy():
    (g,) = _frames(np.arange(6.0).reshape(6, 1))
    assert sum_in_rank_order([(None, g)])[1] is g
    ids, rows = _frames(np.array([2, 5]), np.ones((2, 3)))
    got_ids, got = sum_in_rank_order([(ids, rows)])
    assert got_ids is ids and got is rows and (got == 1.0).all()


def test_sparse_rows_of_several_ranks_add_over_their_union_in_rank_order():
    parts = [
        (np.array([1, 4]), np.array([[1.0], [2.0]])),
        (np.array([4, 6]), np.array([[10.0], [20.0]])),
    ]
    rows, grad = sum_in_rank_order(parts)
    np.testing.assert_array_equal(rows, [1, 4, 6])
    np.testing.assert_array_equal(grad, [[1.0], [12.0], [20.0]])


def test_finite_finds_nan_and_both_infinities():
    g = np.zeros((100, 1), np.float32)
    assert all_finite(g)
    for bad in (np.nan, np.inf, -np.inf):
        g[37] = bad
        assert not all_finite(g)
    g[37] = np.finfo(np.float32).max  # huge but finite
    assert all_finite(g)


@pytest.mark.parametrize(
    ("field", "value", "ok"),
    [("rank", True, False), ("v", True, False), ("lr", 1, True), ("lr", False, False),
     ("blocks", (1,), True), ("op", ["pull"], False)],
)  # fmt: skip
def test_header_fields_have_their_exact_types(field, value, ok):
    head = msgpack.unpackb(pack({"op": "pull", "id": 1, "job": "", "rank": 0, "blocks": []})[0])
    frame = msgpack.packb({**head, field: value})  # a tuple packs as a list
    if ok:
        unpack_header(frame)
    else:
        with pytest.raises(WireError):
            unpack_header(frame)
