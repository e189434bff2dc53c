"""SequencePool: each sequence of a sequence batch reduced to one row, against PyTorch and
finite differences, with empty sequences, ties, errors and a whole model."""

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.backend import resolve_dtype
from distconv.gradient_check import check_layer_grad, check_network_grad
from distconv.layers import (
    FullyConnected,
    LayerError,
    Mixed,
    SequencePool,
    SoftmaxCrossEntropy,
    TableProjection,
)
from distconv.layers.base import LayerTypeError
from distconv.layers.sequence_pool import MODES

F64 = np.float64
#: an empty sequence, one of length 1 and longer ones, the empty one between the others
LENGTHS = [3, 0, 1, 4, 2]


def _batch(rng, lengths=LENGTHS, width=5, dtype=F64):
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return Arg(rng.standard_normal((int(starts[-1]), width)).astype(dtype), seq_starts=starts)


def _torch_pool(torch, x, starts, mode):
    """Sequence by sequence with PyTorch, an empty sequence a row of zeros: the definition."""
    pooled = []
    for s, e in zip(starts[:-1].tolist(), starts[1:].tolist()):
        rows = x[s:e]
        if e == s:
            pooled.append(torch.zeros(x.shape[1], dtype=x.dtype))
        elif mode == "average":
            pooled.append(rows.mean(dim=0))
        elif mode == "sum":
            pooled.append(rows.sum(dim=0))
        elif mode == "max":
            pooled.append(rows.amax(dim=0))
        else:
            pooled.append(rows[-1] if mode == "last" else rows[0])
    return torch.stack(pooled)


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_matches_pytorch_forward_and_backward(torch, rng, mode):
    x = _batch(rng)
    layer = SequencePool(mode)
    out = layer(x)
    assert out.seq_starts is None and out.value.shape == (len(LENGTHS), 5)
    xt = torch.tensor(x.value, requires_grad=True)
    ref = _torch_pool(torch, xt, x.seq_starts, mode)
    np.testing.assert_allclose(out.value, ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    assert not out.value[1].any()  # the empty sequence
    dy = rng.standard_normal(out.value.shape)
    (ref * torch.tensor(dy)).sum().backward()
    before = rng.standard_normal(x.value.shape)
    x.grad = before.copy()  # backward adds into what is there
    out.grad = dy
    layer.backward(lambda p: None)
    np.testing.assert_allclose(x.grad - before, xt.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_against_finite_differences(rng, mode):
    report = check_layer_grad(SequencePool(mode), [_batch(rng)])
    assert list(report.diffs) == ["input 0"] and report.worst < 1e-6


def test_max_routes_each_column_to_its_first_maximum():
    """Ties (``-0.0`` equals ``0.0``) go to the first row, as Paddle's MaxLayer, which replaces
    its maximum only on ``>``; the empty sequence pools to zeros and takes nothing."""
    x = Arg(
        np.array([[1.0, 5.0], [3.0, 5.0], [3.0, 2.0], [-0.0, 7.0], [0.0, 7.0]]),
        seq_starts=np.array([0, 3, 3, 5]),
    )
    layer = SequencePool("max")
    out = layer(x)
    np.testing.assert_array_equal(out.value, [[3.0, 5.0], [0.0, 0.0], [0.0, 7.0]])
    out.grad = np.array([[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]])
    layer.backward(lambda p: None)
    np.testing.assert_array_equal(x.grad, [[0, 20], [10, 0], [0, 0], [50, 60], [0, 0]])


def test_a_nan_is_the_maximum_and_the_first_nan_takes_the_gradient():
    """Whatever its sign bit: one whose sign bit is set, read as an integer, is below -inf."""
    x = Arg(
        np.array([[1.0], [np.copysign(np.nan, -1)], [np.nan], [2.0]]), seq_starts=np.array([0, 4])
    )
    layer = SequencePool("max")
    assert np.isnan(layer(x).value).all()
    layer.output.grad = np.array([[3.0]])
    layer.backward(lambda p: None)
    np.testing.assert_array_equal(x.grad, [[0.0], [3.0], [0.0], [0.0]])


@pytest.mark.parametrize("mode", MODES)
def test_a_batch_of_empty_sequences_pools_to_zeros(mode):
    x = Arg(np.zeros((0, 3)), seq_starts=np.zeros(3, np.int64))
    layer = SequencePool(mode)
    out = layer(x)
    np.testing.assert_array_equal(out.value, np.zeros((2, 3)))
    out.grad = np.ones((2, 3))
    layer.backward(lambda p: None)
    assert x.grad.shape == (0, 3)


@pytest.mark.parametrize("dtype, rtol", [("float16", 1e-3), ("bfloat16", 1e-2), ("float32", 1e-6)])
@pytest.mark.parametrize("mode", MODES)
def test_narrower_rows_pool_as_their_float64_copy(rng, mode, dtype, rtol):
    """16-bit sums are taken in float32 (:class:`~distconv.kernels.rows.RowScatter`): 4096
    ones sum to 4096, where float16 additions stop at 2048 (bfloat16's at 256)."""
    dtype = resolve_dtype(dtype)
    x = _batch(rng, [4096, 0, 3], 2, dtype)
    x.value[:4096] = 1
    out = SequencePool(mode)(x)
    assert out.value.dtype == dtype
    want = SequencePool(mode)(Arg(x.value.astype(F64), seq_starts=x.seq_starts)).value
    picks = mode in ("max", "last", "first")  # a row picked, by its bits in every width: exact
    np.testing.assert_allclose(out.value.astype(F64), want, rtol=0 if picks else rtol)
    if mode == "sum":
        assert out.value[0, 0] == 4096


@pytest.mark.parametrize("dtype, bits", [("float16", 10), ("bfloat16", 7)])
def test_a_16_bit_average_is_rounded_once(rng, dtype, bits):
    """The sum (taken in float32) divided by the length before it is rounded to 16 bits, in
    forward and backward: within half a unit in the last place of the exact mean, as PyTorch's,
    where rounding the sum and the length first and dividing in 16 bits missed by more."""
    dtype = resolve_dtype(dtype)
    lengths = rng.integers(250, 320, 40)
    x = _batch(rng, lengths, 3, dtype)
    x.value[...] = (rng.random(x.value.shape) + 0.5).astype(dtype)
    layer = SequencePool("average")
    out = layer(x)
    dy = (rng.random(out.value.shape) + 0.5).astype(dtype)
    out.grad = dy
    layer.backward(lambda p: None)
    for got, exact in [
        (out.value, SequencePool("average")(Arg(x.value.astype(F64), seq_starts=x.seq_starts))),
        (x.grad, np.repeat(dy.astype(F64) / lengths[:, None], lengths, axis=0)),
    ]:
        exact = getattr(exact, "value", exact)
        ulp = 2.0 ** (np.floor(np.log2(np.abs(exact))) - bits)
        assert np.all(np.abs(got.astype(F64) - exact) <= ulp / 2)


def test_the_mode_is_a_setting():
    assert SequencePool("max").settings() == {"act": "Linear", "mode": "max"}


# -- errors ---------------------------------------------------------------------------------------
def test_a_wrong_mode_is_refused_naming_the_modes():
    with pytest.raises(
        LayerError,
        match=r"^SequencePool 'p': mode='mean' is not one of "
        r"'average', 'sum', 'max', 'last', 'first'$",
    ):
        SequencePool("mean", name="p")


@pytest.mark.parametrize(
    "x, said",
    [
        (Arg(np.zeros((4, 2))), r"seq_starts are missing; a sequence input needs them"),
        (
            Arg(np.zeros((5, 2)), seq_starts=np.array([0, 2, 4])),
            r"seq_starts must rise from 0 to the row count 5, got \[0, 2, 4\]",
        ),
        (
            Arg(np.zeros((5, 2)), seq_starts=np.array([0, 3, 2, 5])),
            r"seq_starts must rise from 0 to the row count 5, got \[0, 3, 2, 5\]",
        ),
        (
            Arg(np.zeros(4), seq_starts=np.array([0, 4])),
            r"the input must hold rows of shape \(N, width\), got \(4,\)",
        ),
    ],
    ids=["no offsets", "short offsets", "falling offsets", "one-dimensional"],
)
def test_bad_sequences_are_refused_naming_the_layer_and_the_rule(x, said):
    with pytest.raises(LayerError, match=rf"^SequencePool 'pool': {said}"):
        SequencePool(name="pool")(x)


def test_integer_rows_are_refused_naming_the_layer():
    x = Arg(np.arange(6).reshape(3, 2), seq_starts=np.array([0, 3]))
    with pytest.raises(LayerTypeError, match=r"^SequencePool 'pool': expected float values, got"):
        SequencePool(name="pool")(x)


# -- a whole model --------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_a_sentence_classifier_passes_the_network_gradient_check(rng, mode):
    """Embedded words, pooled per sentence, classified with one label per sentence."""
    net = Network()
    net.add("embed", Mixed([TableProjection(7, 4, dtype=F64)], act="tanh", dtype=F64), "words")
    net.add("pool", SequencePool(mode), "embed")
    net.add("fc", FullyConnected(4, 3, dtype=F64), "pool")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    for p in net.parameters():
        p.value[...] = rng.standard_normal(p.shape)
    words = Arg(ids=np.array([1, 4, 4, 0, 6, 2, 5, 3, 1]), seq_starts=np.array([0, 3, 3, 4, 9]))
    feeds = {"words": words, "label": Arg(ids=np.array([2, 0, 1, 2]))}
    net.forward(feeds)
    assert net.layers["pool"].output.value.shape == (4, 4)
    report = check_network_grad(net, feeds)
    assert sorted(report.diffs) == sorted(f"param {p.name}" for p in net.parameters())
    assert report.worst < 1e-6


# -- the device path's scatters -------------------------------------------------------------------
#: the target dtypes cupy 13.0 to 14.0.x take in ``maximum.at`` and ``minimum.at`` (int64 came in
#: 14.1; ``cupy/_core/_routines_indexing.pyx``, ``_scatter_op_single``); distconv asks cupy >= 13
CUPY_13_MAX_MIN_AT = {np.dtype(t) for t in ("int32", "uint32", "uint64", "float32", "float64")}


class _Cupy13Scatters:
    """numpy, whose ``maximum.at`` and ``minimum.at`` refuse what cupy 13's refuse, as cupy's
    TypeError: how the device path's scatters fare on the oldest cupy distconv accepts, on a
    machine with no GPU."""

    def __init__(self):
        self.maximum, self.minimum = self._ufunc(np.maximum), self._ufunc(np.minimum)

    @staticmethod
    def _ufunc(ufunc):
        class Scatter:
            def at(self, a, indices, b=None):
                if a.dtype not in CUPY_13_MAX_MIN_AT:
                    raise TypeError(f"cupy.{ufunc.__name__}.at does not take {a.dtype}")
                ufunc.at(a, indices, b)

        return Scatter()

    def __getattr__(self, name):
        return getattr(np, name)


def _argmax_case(rng, dtype):
    """Rows of few distinct values (ties in every column), NaNs of both signs, zeros of both
    signs and infinities, in segments some of which are empty; and numpy's argmax of each
    segment (the first maximum, a NaN above all), from a float64 copy, ``rows`` where empty."""
    values = rng.choice(np.array([-np.inf, -2, -1, -0.0, 0.0, 1, 2, np.inf]), (40, 3))
    values[rng.random(values.shape) < 0.05] = np.nan
    values[3, 0] = np.copysign(np.nan, -1)
    values = values.astype(resolve_dtype(dtype))
    seg = np.sort(rng.choice([0, 1, 3, 4, 5, 7], 40))
    want = np.full((9, 3), 40)
    for k in np.unique(seg):
        want[k] = np.flatnonzero(seg == k)[0] + values[seg == k].astype(F64).argmax(axis=0)
    return values, seg, want


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_the_host_and_the_device_argmax_agree_with_numpy(rng, dtype):
    """The host's reduceat and the device's integer keys, both run here on numpy."""
    from distconv.kernels.sequence import _argmax_by_keys, _argmax_by_reduceat

    for _ in range(20):
        values, seg, want = _argmax_case(rng, dtype)
        np.testing.assert_array_equal(_argmax_by_reduceat(values, seg, 9), want)
        np.testing.assert_array_equal(_argmax_by_keys(values, seg, 9), want)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
def test_the_device_argmax_scatters_only_what_cupy_13_takes(monkeypatch, rng, dtype):
    """cupy's ``maximum.at`` and ``minimum.at`` took no int64 before 14.1: the max's keys and
    row numbers are unsigned, which every cupy >= 13 takes, and the result is the same."""
    from distconv.kernels import sequence

    values, seg, want = _argmax_case(rng, dtype)
    monkeypatch.setattr(sequence, "get_array_module", lambda *a: _Cupy13Scatters())
    got = sequence._argmax_by_keys(values, seg, 9)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)
