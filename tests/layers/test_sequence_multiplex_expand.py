import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad
from distconv.kernels.activation import Linear
from distconv.kernels.sequence import segment_ids
from distconv.layers import LayerError
from distconv.layers.expand import FeatureMapExpand
from distconv.layers.multiplex import Multiplex
from distconv.layers.sequence import SequenceConcat

F64 = np.float64


def _seq(rng, lengths, width, dtype=F64):
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return Arg(rng.standard_normal((int(starts[-1]), width)).astype(dtype), seq_starts=starts)


def _backward(layer, dy):
    layer.output.grad = dy
    layer.backward(lambda p: None)


def test_segment_ids_with_empty_segments():
    assert segment_ids(np.array([0, 2, 2, 5]), 5).tolist() == [0, 0, 2, 2, 2]
    assert segment_ids(np.array([0, 0, 0]), 0).tolist() == []


# -- SequenceConcat -------------------------------------------------------------------------------
LENGTHS = [([2, 1, 3], [1, 4, 2]), ([3, 0, 1, 2], [0, 2, 2, 1]), ([5], [3])]


def _concat_reference(a, b):
    """Sequence by sequence, with a loop: the obvious definition."""
    sa, sb = a.seq_starts, b.seq_starts
    parts = []
    for i in range(len(sa) - 1):
        parts += [a.value[sa[i] : sa[i + 1]], b.value[sb[i] : sb[i + 1]]]
    return np.concatenate(parts)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint64])
def test_narrow_or_unsigned_offsets_are_widened_before_any_arithmetic(rng, dtype):
    """uint8 offsets [0, 200] + [0, 100] wrap to [0, 44] unless widened first."""
    a = Arg(rng.standard_normal((200, 2)), seq_starts=np.array([0, 200], dtype))
    b = Arg(rng.standard_normal((100, 2)), seq_starts=np.array([0, 100], dtype))
    out = SequenceConcat()(a, b)
    np.testing.assert_array_equal(out.seq_starts, [0, 300])
    assert out.seq_starts.dtype == np.int64
    np.testing.assert_array_equal(out.value, np.concatenate([a.value, b.value]))


@pytest.mark.parametrize("la,lb", LENGTHS)
def test_sequence_concat_interleaves_and_routes_gradients_back(rng, la, lb):
    a, b = _seq(rng, la, 3), _seq(rng, lb, 3)
    layer = SequenceConcat()
    out = layer(a, b)
    np.testing.assert_array_equal(out.value, _concat_reference(a, b))
    np.testing.assert_array_equal(out.seq_starts, a.seq_starts + b.seq_starts)
    # backward of the reference: tag each output row with its number and check where it lands
    dy = np.repeat(np.arange(len(out.value), dtype=F64)[:, None], 3, axis=1)
    _backward(layer, dy)
    tags = _concat_reference(
        Arg(a.grad, seq_starts=a.seq_starts), Arg(b.grad, seq_starts=b.seq_starts)
    )
    np.testing.assert_array_equal(tags[:, 0], np.arange(len(out.value)))


@pytest.mark.parametrize("la,lb", LENGTHS)
@pytest.mark.parametrize("bias,act", [(False, None), (True, "tanh"), (True, "softmax")])
def test_sequence_concat_gradients(rng, la, lb, bias, act):
    layer = SequenceConcat(4, bias=bias, act=act, dtype=F64)
    if bias:
        layer.bias.value[...] = rng.standard_normal(4)
    report = check_layer_grad(layer, [_seq(rng, la, 4), _seq(rng, lb, 4)])
    assert {"input 0", "input 1"} <= set(report.diffs)
    assert bias == (f"param {layer.name}.bias" in report.diffs)


def test_sequence_concat_float32_and_one_input_without_gradient(rng):
    a = _seq(rng, [2, 3], 5, np.float32)
    b = _seq(rng, [1, 1], 5, np.float32)
    b.needs_grad = False
    layer = SequenceConcat(5, bias=True, act="sigmoid")
    assert check_layer_grad(layer, [a, b]).worst <= 0.02
    assert not b.has_grad
    np.testing.assert_allclose(
        layer(a, b).value, 1 / (1 + np.exp(-_concat_reference(a, b))), rtol=1e-6
    )


def test_sequence_concat_errors(rng):
    layer = SequenceConcat(name="cat")
    a = _seq(rng, [1, 2], 3)
    with pytest.raises(
        LayerError,
        match=r"SequenceConcat 'cat': inputs hold different numbers of sequences: 2 and 3",
    ):
        layer(a, _seq(rng, [1, 1, 1], 3))
    with pytest.raises(LayerError, match=r"SequenceConcat 'cat': inputs differ in width: 3 and 4"):
        layer(a, _seq(rng, [1, 2], 4))
    with pytest.raises(LayerError, match=r"width: 3 and 3 \(built for width 5\)"):
        SequenceConcat(5)(a, _seq(rng, [1, 2], 3))
    with pytest.raises(LayerError, match="input 1's seq_starts are missing"):
        layer(a, Arg(np.zeros((3, 3))))
    with pytest.raises(
        LayerError,
        match=r"input 0's seq_starts must rise from 0 to the row count 3, got \[0, 1, 4\]",
    ):
        layer(Arg(a.value, seq_starts=np.array([0, 1, 4])), a)
    with pytest.raises(
        LayerError, match=r"input 0 must hold rows of shape \(N, width\), got \(3,\)"
    ):
        layer(Arg(np.zeros(3), seq_starts=np.array([0, 3])), a)
    with pytest.raises(LayerError, match="a bias needs width"):
        SequenceConcat(bias=True)


# -- Multiplex ------------------------------------------------------------------------------------
@pytest.mark.parametrize("n,shape", [(2, (7, 3)), (3, (9, 2, 2)), (1, (4, 5))])
@pytest.mark.parametrize("act", [None, "relu"])
def test_multiplex_gradients(rng, n, shape, act):
    ids = Arg(ids=rng.integers(0, n, shape[0]))
    cands = [Arg(rng.standard_normal(shape)) for _ in range(n)]
    report = check_layer_grad(Multiplex(act=act), [ids, *cands])
    assert {f"input {i}" for i in range(1, n + 1)} <= set(report.diffs)


def test_multiplex_copies_chosen_rows_and_routes_gradients(rng):
    ids = np.array(
        [2, 2, 0, 1, 1, 1, 0, 2]
    )  # runs of equal ids: Paddle's layer copies them as blocks
    cands = [Arg(rng.standard_normal((8, 3))) for _ in range(3)]
    cands[1].needs_grad = False
    layer = Multiplex()
    y = layer(Arg(ids=ids[:, None]), *cands).value
    stacked = np.stack([c.value for c in cands])
    np.testing.assert_array_equal(y, stacked[ids, np.arange(8)])
    dy = rng.standard_normal((8, 3))
    _backward(layer, dy)
    for i in (0, 2):
        np.testing.assert_array_equal(cands[i].grad, np.where((ids == i)[:, None], dy, 0.0))
    assert not cands[1].has_grad


def test_multiplex_float32_and_sequences(rng):
    starts = np.array([0, 2, 5])
    cands = [Arg(rng.standard_normal((5, 4)).astype(np.float32), seq_starts=starts) for _ in "ab"]
    layer = Multiplex(act="tanh")
    assert check_layer_grad(layer, [Arg(ids=np.array([1, 0, 0, 1, 1])), *cands]).worst <= 0.02
    assert layer.output.seq_starts is starts


def test_multiplex_errors(rng):
    layer = Multiplex(name="mux")
    a, b = Arg(np.zeros((3, 2))), Arg(np.zeros((3, 2)))
    with pytest.raises(
        LayerError,
        match=r"Multiplex 'mux': ids must lie in \[0, 2\) for 2 candidate inputs, "
        r"got range \[0, 2\]",
    ):
        layer(Arg(ids=np.array([0, 2, 1])), a, b)
    with pytest.raises(LayerError, match=r"got range \[-1, 1\]"):
        layer(Arg(ids=np.array([0, -1, 1])), a, b)
    with pytest.raises(
        LayerError, match=r"inputs must share one shape: input 1 is \(3, 2\), input 2 \(3, 3\)"
    ):
        layer(Arg(ids=np.array([0, 1, 1])), a, Arg(np.zeros((3, 3))))
    with pytest.raises(
        LayerError, match=r"one integer id per row \(3 rows\), got ids of shape \(2,\)"
    ):
        layer(Arg(ids=np.array([0, 1])), a, b)
    with pytest.raises(LayerError, match="dtype float64"):
        layer(Arg(ids=np.array([0.0, 1.0, 1.0])), a, b)
    with pytest.raises(LayerError, match="row choices in Arg.ids, got ids=None"):
        layer(Arg(np.zeros((3, 1))), a, b)
    with pytest.raises(LayerError, match="expected 2 to any number input"):
        layer(Arg(ids=np.array([0, 0, 0])))


@pytest.mark.parametrize("bad", ["ids only", "0-d"])
def test_multiplex_first_candidate_without_rows_names_the_layer(bad):
    """A first candidate with no value (ids only) or a 0-d value raised Arg's AttributeError or
    an IndexError from reading its shape, not a LayerError naming the layer (a later one was
    caught by the shape comparison)."""
    wrong = Arg(ids=np.array([1])) if bad == "ids only" else Arg(np.array(2.0))
    with pytest.raises(LayerError, match=r"Multiplex 'mux': input 1 must hold rows \(N, \*\)"):
        Multiplex(name="mux")(Arg(ids=np.array([0])), wrong, Arg(np.zeros((1, 2))))


# -- FeatureMapExpand -----------------------------------------------------------------------------
@pytest.mark.parametrize("as_row", [True, False])
@pytest.mark.parametrize("f,shape", [(1, (3, 4)), (3, (2, 5)), (4, (2, 2, 3))])
def test_feature_map_expand_gradients(rng, as_row, f, shape):
    layer = FeatureMapExpand(f, as_row_vector=as_row, act="tanh")
    x = Arg(rng.standard_normal(shape))
    check_layer_grad(layer, [x])
    assert layer.output.shape == (shape[0], f * int(np.prod(shape[1:])))


def test_feature_map_expand_float32_over_sequences(rng):
    x = Arg(rng.standard_normal((5, 3)).astype(np.float32), seq_starts=np.array([0, 2, 5]))
    layer = FeatureMapExpand(2, as_row_vector=False, act="sigmoid")
    assert check_layer_grad(layer, [x]).worst <= 0.02
    assert layer.output.seq_starts.tolist() == [0, 2, 5]


@pytest.mark.parametrize("as_row", [True, False])
def test_feature_map_expand_parity_with_torch(torch, rng, as_row):
    x, dy = rng.standard_normal((3, 4)), rng.standard_normal((3, 12))
    tx = torch.tensor(x, requires_grad=True)
    ty = tx.repeat(1, 3) if as_row else tx.repeat_interleave(3, dim=1)
    ty.backward(torch.tensor(dy))
    layer, xa = FeatureMapExpand(3, as_row_vector=as_row), Arg(x)
    np.testing.assert_array_equal(layer(xa).value, ty.detach().numpy())
    _backward(layer, dy)
    np.testing.assert_allclose(xa.grad, tx.grad.numpy(), rtol=1e-12)


def test_feature_map_expand_layouts():
    x = Arg(np.array([[1.0, 2.0, 3.0]]))
    row = FeatureMapExpand(2)(x).value.reshape(2, 3)
    col = FeatureMapExpand(2, as_row_vector=False)(x).value.reshape(3, 2)
    np.testing.assert_array_equal(row, [[1, 2, 3], [1, 2, 3]])
    np.testing.assert_array_equal(col, [[1, 1], [2, 2], [3, 3]])


class _Spy(Linear):
    calls = 0

    def backward(self, y, dy):
        _Spy.calls += 1
        return dy


def test_feature_map_expand_without_input_gradient_does_nothing(rng):
    spy = _Spy()
    layer = FeatureMapExpand(2, act=spy)
    x = Arg(rng.standard_normal((2, 3)), needs_grad=False)
    layer(x)
    layer.output.grad = np.ones((2, 6))
    layer.backward(lambda p: None)
    assert _Spy.calls == 0 and not x.has_grad
    layer(Arg(x.value))
    layer.output.grad = np.ones((2, 6))
    layer.backward(lambda p: None)
    assert _Spy.calls == 1


def test_feature_map_expand_errors():
    with pytest.raises(LayerError, match=r"FeatureMapExpand: num_filters=0 must be an int >= 1"):
        FeatureMapExpand(0)
    with pytest.raises(LayerError, match="FeatureMapExpand 'fm': backward called before forward"):
        FeatureMapExpand(2, name="fm").backward(lambda p: None)


@pytest.mark.parametrize("as_row", [False, True])
def test_feature_map_expand_sums_16_bit_copies_in_float32(as_row):
    """The input gradient summed its copies in the gradient's type: 4096 copies of 0.1 gave 32
    in bfloat16 and 256 in float16, not 409.6."""
    bf16 = pytest.importorskip("ml_dtypes").bfloat16
    for dtype in (bf16, np.float16):
        layer = FeatureMapExpand(4096, as_row_vector=as_row)
        x = Arg(np.ones((2, 3), dtype))
        y = layer(x).value
        layer.output.grad = np.full(y.shape, 0.1, dtype)
        layer.backward(lambda p: None)
        assert x.grad.dtype == dtype
        np.testing.assert_allclose(x.grad.astype(np.float64), 409.6, rtol=2**-7)
