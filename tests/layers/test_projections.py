"""Projections and operators, each alone inside a Mixed layer: gradients, references, errors."""

import re

import numpy as np
import pytest

from distconv import Arg, Parameter
from distconv.gradient_check import check_layer_grad
from distconv.layers.base import LayerError
from distconv.layers.context import ContextProjection
from distconv.layers.conv import ConvProjection, ConvTransposeProjection
from distconv.layers.mixed import Mixed
from distconv.layers.operator import ConvOperator, DotMulOperator
from distconv.layers.projection import (
    DotMulProjection,
    FullMatrixProjection,
    IdentityProjection,
    ScalingProjection,
    SliceProjection,
    TableProjection,
    TransposedFullMatrixProjection,
)

F64 = np.float64
# uneven lengths, an empty sequence and one shorter than every window
SEQ_STARTS = np.array([0, 4, 4, 5, 11, 13])


def randomize(layer, rng):
    """Random parameter values, so zero-initialised weights (padding, bias) are really tested."""
    for p in layer.parameters():
        p.value[...] = rng.standard_normal(p.shape)
    return layer


def seq_input(rng, width, dtype=F64):
    return Arg(rng.standard_normal((SEQ_STARTS[-1], width)).astype(dtype), seq_starts=SEQ_STARTS)


def run_backward(layer, inputs, dout, callback=lambda p: None):
    y = layer(*inputs).value.copy()
    layer.output.grad = dout
    layer.backward(callback)
    return y


# -- every projection alone, with and without bias -----------------------------------------------
PROJECTIONS = {
    "full": lambda: FullMatrixProjection(6, 4, dtype=F64),
    "transposed_full": lambda: TransposedFullMatrixProjection(6, 5, dtype=F64),
    "dot_mul": lambda: DotMulProjection(6, dtype=F64),
    "scaling": lambda: ScalingProjection(6, dtype=F64),
    "identity": lambda: IdentityProjection(6),
    "identity_offset": lambda: IdentityProjection(6, 3, offset=2),
    "slice": lambda: SliceProjection(6, [(4, 6), (0, 3), (1, 2)]),
    "slice_overlapping": lambda: SliceProjection(6, [(0, 4), (2, 6)]),
}


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("act", [None, "tanh"])
@pytest.mark.parametrize("kind", sorted(PROJECTIONS))
def test_projection_gradients(rng, kind, bias, act):
    layer = randomize(Mixed([PROJECTIONS[kind]()], bias=bias, act=act, dtype=F64), rng)
    report = check_layer_grad(layer, [Arg(rng.standard_normal((5, 6)))])
    assert "input 0" in report.diffs


def test_table_projection_gradients(rng):
    layer = randomize(Mixed([TableProjection(7, 3, dtype=F64)], bias=True, dtype=F64), rng)
    ids = Arg(ids=np.array([2, 0, 2, 6, 2, 1]))
    report = check_layer_grad(layer, [ids])
    assert set(report.diffs) == {f"param {layer.name}.proj0.weight", f"param {layer.name}.bias"}


def test_projection_reads_images_as_rows(rng):
    layer = randomize(Mixed([FullMatrixProjection(2 * 3 * 3, 4, dtype=F64)], dtype=F64), rng)
    x = Arg(rng.standard_normal((2, 2, 3, 3)))
    assert layer(x).shape == (2, 4)
    check_layer_grad(layer, [x])
    assert x.grad.shape == (2, 2, 3, 3)


def test_float32_projections(rng):
    x = Arg(rng.standard_normal((SEQ_STARTS[-1], 4)).astype(np.float32), seq_starts=SEQ_STARTS)
    layer = randomize(Mixed([ContextProjection(4, 3, -1, True)], bias=True, act="tanh"), rng)
    assert layer(x).value.dtype == np.float32
    assert check_layer_grad(layer, [x]).worst <= 0.02
    fc = randomize(Mixed([FullMatrixProjection(6, 4)], bias=True, act="tanh"), rng)
    assert check_layer_grad(fc, [Arg(rng.standard_normal((3, 6)).astype(np.float32))]).worst <= 0.02


# -- values ---------------------------------------------------------------------------------------
def test_elementwise_and_slice_values(rng):
    x = rng.standard_normal((3, 6))
    cases = [
        (DotMulProjection(6, dtype=F64), lambda w: x * w),
        (ScalingProjection(6, dtype=F64), lambda w: w[0] * x),
        (IdentityProjection(6, 3, offset=2), lambda w: x[:, 2:5]),
        (SliceProjection(6, [(4, 6), (0, 1)]), lambda w: np.concatenate([x[:, 4:], x[:, :1]], 1)),
    ]
    for proj, expected in cases:
        layer = randomize(Mixed([proj], dtype=F64), rng)
        w = None if proj.weight is None else proj.weight.value
        np.testing.assert_allclose(layer(Arg(x)).value, expected(w), err_msg=repr(proj))


def test_default_weights_start_as_identity():
    x = Arg(np.arange(6.0).reshape(2, 3))
    for proj in (DotMulProjection(3, dtype=F64), ScalingProjection(3, dtype=F64)):
        np.testing.assert_array_equal(Mixed([proj])(x).value, x.value)


def test_slice_overlap_gradient_counts_both_reads(rng):
    layer = Mixed([SliceProjection(4, [(0, 3), (1, 4)])])
    x = Arg(rng.standard_normal((2, 4)))
    run_backward(layer, [x], np.ones((2, 6)))
    np.testing.assert_array_equal(x.grad, [[1, 2, 2, 1]] * 2)


# -- context projection ---------------------------------------------------------------------------
def paddle_context_forward(x, starts, length, start, padding, begin_pad):
    """Paddle's ContextProjectionForward (CPU), transliterated loop for loop as the reference."""
    n, d = x.shape
    out = np.zeros((n, length * d))
    for i in range(len(starts) - 1):
        s0, s1 = starts[i], starts[i + 1]
        for j in range(length):
            cols = slice(j * d, (j + 1) * d)
            begin, end = s0 + start + j, s1 + start + j
            dst_begin, dst_end = s0, s1
            if begin < s0:
                pad = min(s0 - begin, s1 - s0)
                if padding is not None:
                    out[s0 : s0 + pad, cols] += padding[j : j + pad]
                dst_begin, begin = s0 + pad, s0
            if end > s1:
                pad = min(end - s1, s1 - s0)
                if padding is not None:
                    first = begin_pad + start + j - pad
                    out[s1 - pad : s1, cols] += padding[first : first + pad]
                dst_end, end = s1 - pad, s1
            if end > begin:
                out[dst_begin:dst_end, cols] += x[begin:end]
    return out


CONTEXTS = [(3, -1), (3, 0), (2, -3), (4, 1), (1, 0), (5, -2), (3, 2), (6, -1)]


@pytest.mark.parametrize("length,start", CONTEXTS)
@pytest.mark.parametrize("trainable", [False, True])
def test_context_projection_matches_paddle(rng, length, start, trainable):
    proj = ContextProjection(3, length, start, trainable_padding=trainable, dtype=F64)
    layer = randomize(Mixed([proj], dtype=F64), rng)
    x = seq_input(rng, 3)
    assert proj.begin_pad == max(0, -start) and proj.end_pad == max(0, start + length - 1)
    padding = proj.weight.value if proj.weight is not None else None
    if trainable and proj.begin_pad + proj.end_pad:
        assert padding.shape == (proj.begin_pad + proj.end_pad, 3)
    want = paddle_context_forward(x.value, SEQ_STARTS, length, start, padding, proj.begin_pad)
    np.testing.assert_allclose(layer(x).value, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("length,start", CONTEXTS)
@pytest.mark.parametrize("trainable", [False, True])
def test_context_projection_gradients(rng, length, start, trainable):
    proj = ContextProjection(3, length, start, trainable_padding=trainable, dtype=F64)
    layer = randomize(Mixed([proj], bias=trainable, act="tanh", dtype=F64), rng)
    report = check_layer_grad(layer, [seq_input(rng, 3)])
    if proj.weight is not None:
        assert f"param {layer.name}.proj0.weight" in report.diffs


def test_context_default_start_is_paddles():
    # Paddle's config helper: -(len - 1) / 2 in Python 2, which floors: an even window reaches
    # one row further back than forward
    starts = {length: ContextProjection(4, length).context_start for length in range(1, 7)}
    assert starts == {1: 0, 2: -1, 3: -1, 4: -2, 5: -2, 6: -3}


def test_context_without_trainable_padding_has_no_parameter():
    layer = Mixed([ContextProjection(3, 3, -1)])
    assert layer.parameters() == [] and layer.projections[0].weight is None


@pytest.mark.parametrize(
    "args,why",
    [
        ((3, 3, -1), r"trainable_padding=False"),  # zeros outside a sequence, nothing to learn
        ((3, 1, 0, True), r"reads no row outside a sequence"),  # the window is the row itself
    ],
)
def test_context_given_a_weight_it_has_no_room_for_says_why(args, why):
    """A window that learns no padding holds no parameter: a weight given to share was
    refused as "shared weight has shape (2, 3), needs None", as though a shape were wrong."""
    w = Parameter("pad", np.zeros((2, 3), np.float32))
    with pytest.raises(LayerError, match=r"has no padding rows to learn") as e:
        ContextProjection(*args, weight=w)
    assert re.search(why, str(e.value)) and "needs None" not in str(e.value)


# -- convolutions ---------------------------------------------------------------------------------
CONVS = [
    # channels in, out, image, kernel, stride, padding, dilation, groups
    (2, 4, (5, 5), 3, 1, 0, 1, 1),
    (2, 4, (6, 5), 3, 2, 1, 1, 2),
    (3, 6, (5, 6), (2, 3), (1, 2), (1, 0), 1, 3),
    (2, 2, (7, 7), 3, 1, 2, 2, 1),
    (4, 4, (4, 4), 1, 1, 0, 1, 4),
]


@pytest.mark.parametrize("cls", [ConvProjection, ConvTransposeProjection])
@pytest.mark.parametrize("c,o,size,k,s,p,d,g", CONVS)
def test_conv_projection_gradients(rng, cls, c, o, size, k, s, p, d, g):
    proj = cls(c, o, k, s, p, d, g, input_size=size, dtype=F64)
    layer = randomize(Mixed([proj], bias=True, shared_bias=True, act="tanh", dtype=F64), rng)
    x = Arg(rng.standard_normal((2, c * size[0] * size[1])))
    assert layer(x).shape == (2, o * int(np.prod(proj.output_size)))
    check_layer_grad(layer, [x], elements=3)


def test_conv3d_projection_gradients(rng):
    proj = ConvProjection(2, 3, 2, input_size=(3, 4, 3), padding=(0, 1, 1), dtype=F64)
    layer = randomize(Mixed([proj], bias=True, dtype=F64), rng)
    check_layer_grad(layer, [Arg(rng.standard_normal((2, 2 * 36)))], elements=3)


@pytest.mark.parametrize("c,o,size,k,s,p,d,g", CONVS[:3])
def test_conv_operator_gradients(rng, c, o, size, k, s, p, d, g):
    op = ConvOperator(c, o, k, s, p, d, g, input_size=size)
    layer = randomize(
        Mixed([None, None], [op], bias=True, shared_bias=True, act="tanh", dtype=F64), rng
    )
    image = Arg(rng.standard_normal((3, c * size[0] * size[1])))
    filters = Arg(rng.standard_normal((3, op.filter_width)))
    report = check_layer_grad(layer, [image, filters], elements=4)
    assert {"input 0", "input 1"} <= set(report.diffs)


def test_dot_mul_operator_gradients_and_values(rng):
    layer = randomize(Mixed([None, None], [DotMulOperator(0.5)], size=4, bias=True, dtype=F64), rng)
    a, b = Arg(rng.standard_normal((3, 4))), Arg(rng.standard_normal((3, 4)))
    np.testing.assert_allclose(layer(a, b).value, 0.5 * a.value * b.value + layer.bias.value)
    check_layer_grad(layer, [a, b])
    same = Mixed([None], [DotMulOperator(2.0, (0, 0))], size=4)
    check_layer_grad(same, [Arg(rng.standard_normal((3, 4)))])  # a * a: the input twice


# -- PyTorch parity -------------------------------------------------------------------------------
def test_table_projection_matches_torch_embedding(torch, rng):
    import torch.nn.functional as F

    layer = Mixed([TableProjection(9, 5, dtype=F64)])
    ids = np.array([3, 1, 3, 8, 0, 3, 1])
    dout = rng.standard_normal((7, 5))
    y = run_backward(layer, [Arg(ids=ids)], dout)
    w = torch.tensor(layer.projections[0].weight.value, requires_grad=True)
    ref = F.embedding(torch.tensor(ids), w)
    ref.backward(torch.tensor(dout))
    np.testing.assert_allclose(y, ref.detach().numpy(), rtol=0, atol=0)
    np.testing.assert_allclose(layer.projections[0].weight.grad, w.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("cls", [FullMatrixProjection, TransposedFullMatrixProjection])
def test_full_matrix_matches_torch_linear(torch, rng, cls):
    import torch.nn.functional as F

    proj = cls(6, 4, dtype=F64)
    layer = Mixed([proj])
    x, dout = Arg(rng.standard_normal((5, 6))), rng.standard_normal((5, 4))
    y = run_backward(layer, [x], dout)
    w_ours = proj.weight.value
    tx = torch.tensor(x.value, requires_grad=True)
    tw = torch.tensor(w_ours.T if proj.transposed else w_ours, requires_grad=True)
    ref = F.linear(tx, tw)
    ref.backward(torch.tensor(dout))
    # summation order differs between BLAS calls: float64 agrees to ~1e-12 absolute
    tol = {"rtol": 1e-10, "atol": 1e-12}
    np.testing.assert_allclose(y, ref.detach().numpy(), **tol)
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), **tol)
    dw = tw.grad.numpy()
    np.testing.assert_allclose(proj.weight.grad, dw.T if proj.transposed else dw, **tol)


@pytest.mark.parametrize("transposed", [False, True])
def test_conv_projection_matches_torch(torch, rng, transposed):
    import torch.nn.functional as F

    cls = ConvTransposeProjection if transposed else ConvProjection
    kw = {"output_padding": 1} if transposed else {}
    proj = cls(4, 6, 3, stride=2, padding=1, groups=2, input_size=(5, 6), dtype=F64, **kw)
    layer = Mixed([proj])
    x = rng.standard_normal((3, 4, 5, 6))
    dout = rng.standard_normal((3, proj.out_width))
    xa = Arg(x.reshape(3, -1))
    y = run_backward(layer, [xa], dout)
    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(proj.weight.value, requires_grad=True)
    if transposed:
        ref = F.conv_transpose2d(tx, tw, stride=2, padding=1, output_padding=1, groups=2)
    else:
        ref = F.conv2d(tx, tw, stride=2, padding=1, groups=2)
    assert tuple(ref.shape[2:]) == proj.output_size
    ref.backward(torch.tensor(dout.reshape(ref.shape)))
    np.testing.assert_allclose(y, ref.detach().numpy().reshape(3, -1), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(xa.grad, tx.grad.numpy().reshape(3, -1), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(proj.weight.grad, tw.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_conv_operator_matches_torch_per_sample(torch, rng):
    import torch.nn.functional as F

    n, c, o, g = 3, 4, 6, 2
    op = ConvOperator(c, o, 3, input_size=(5, 5), stride=2, padding=1, groups=g)
    layer = Mixed([None, None], [op])
    x, f = rng.standard_normal((n, c, 5, 5)), rng.standard_normal((n, o, c // g, 3, 3))
    image, filters = Arg(x.reshape(n, -1)), Arg(f.reshape(n, -1))
    dout = rng.standard_normal((n, op.out_width))
    y = run_backward(layer, [image, filters], dout)
    tx, tf = (torch.tensor(a, requires_grad=True) for a in (x, f))
    # every sample its own filter bank: the batch becomes groups of one big convolution
    ref = F.conv2d(
        tx.reshape(1, n * c, 5, 5), tf.reshape(n * o, c // g, 3, 3), None, 2, 1, 1, n * g
    )
    ref.backward(torch.tensor(dout.reshape(ref.shape)))
    np.testing.assert_allclose(y, ref.detach().numpy().reshape(n, -1), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(image.grad, tx.grad.numpy().reshape(n, -1), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(filters.grad, tf.grad.numpy().reshape(n, -1), rtol=1e-10, atol=1e-12)


# -- the weight-update contract ------------------------------------------------
def test_table_gradient_only_touches_looked_up_rows(rng):
    layer = Mixed([TableProjection(6, 2, dtype=F64)])
    run_backward(layer, [Arg(ids=np.array([[4], [1], [4]]))], np.ones((3, 2)))
    np.testing.assert_array_equal(layer.projections[0].weight.grad[:, 0], [0, 1, 0, 0, 2, 0])


def test_input_gradient_uses_the_weight_before_the_callback_updates_it(rng):
    proj = FullMatrixProjection(3, 2, dtype=F64)
    layer = Mixed([proj])
    x, dout = Arg(rng.standard_normal((4, 3))), rng.standard_normal((4, 2))
    w_before = proj.weight.value.copy()

    def sgd(p):
        p.value -= 10 * p.grad

    run_backward(layer, [x], dout, sgd)
    np.testing.assert_allclose(x.grad, dout @ w_before)
    assert not np.allclose(proj.weight.value, w_before)


def test_shared_weight_between_projections(rng):
    table = Mixed([TableProjection(5, 3, dtype=F64)], name="a")
    w = table.projections[0].weight
    tied = Mixed([TableProjection(5, 3, dtype=F64, weight=w)], name="b")
    w.shared_count = 2  # outside a Network nobody counts users: the caller says how many
    assert tied.parameters() == [w]
    fired = []
    for layer, ids in ((table, [0, 1]), (tied, [1, 4])):
        run_backward(layer, [Arg(ids=np.array(ids))], np.ones((2, 3)), fired.append)
    assert fired == [w]  # once, after both users
    np.testing.assert_array_equal(w.grad[:, 0], [1, 2, 0, 0, 1])
    assert w.name == "a.proj0.weight"


# -- errors ---------------------------------------------------------------------------------------
def test_ids_out_of_range_name_layer_and_range():
    layer = Mixed([TableProjection(10, 4)], name="emb")
    msg = r"Mixed 'emb': TableProjection 'proj0': ids must lie in \[0, 10\) .*got range \[3, 12\]"
    with pytest.raises(LayerError, match=msg):
        layer(Arg(ids=np.array([3, 12, 5])))
    with pytest.raises(LayerError, match=r"or be -1 \(no row\), got range \[-2, 5\]"):
        layer(Arg(ids=np.array([-2, 5])))
    with pytest.raises(LayerError, match="needs integer ids .*got dtype float64"):
        layer(Arg(np.zeros((2, 1))))


def test_wrong_width_names_projection_and_shape():
    layer = Mixed([FullMatrixProjection(5, 4)], name="m")
    with pytest.raises(
        LayerError,
        match=r"Mixed 'm': FullMatrixProjection 'proj0': expected input of 5 columns per row, "
        r"got shape \(2, 6\)",
    ):
        layer(Arg(np.zeros((2, 6), np.float32)))


def test_slices_out_of_range():
    with pytest.raises(LayerError, match=r"slice \(3, 6\) is out of range for an input of 5"):
        SliceProjection(5, [(0, 2), (3, 6)])
    with pytest.raises(LayerError, match=r"slice \(2, 2\) is out of range"):
        SliceProjection(5, [(2, 2)])
    with pytest.raises(LayerError, match=r"IdentityProjection: slice \(2, 6\) is out of range"):
        IdentityProjection(5, 4, offset=2)
    with pytest.raises(LayerError, match="at least one"):
        SliceProjection(5, [])


def test_context_needs_valid_sequences():
    layer = Mixed([ContextProjection(2, 3)], name="ctx")
    with pytest.raises(LayerError, match=r"Mixed 'ctx': ContextProjection 'proj0': needs a seq"):
        layer(Arg(np.zeros((4, 2))))
    with pytest.raises(
        LayerError, match=r"seq_starts must rise from 0 to the row count 4, got \[0, 3\]"
    ):
        layer(Arg(np.zeros((4, 2)), seq_starts=np.array([0, 3])))
    with pytest.raises(LayerError, match="context_length=0 must be >= 1"):
        ContextProjection(2, 0)


def test_construction_errors():
    with pytest.raises(LayerError, match=r"shared weight has shape \(3, 4\), needs \(4, 3\)"):
        FullMatrixProjection(3, 4, weight=Parameter("w", np.zeros((3, 4))))
    with pytest.raises(LayerError, match="in_channels=3 must be a positive multiple of groups=2"):
        ConvProjection(3, 4, 3, input_size=5, groups=2)
    with pytest.raises(LayerError, match=r"kernel \(5, 5\).*larger than the input \(3, 3\)"):
        ConvProjection(1, 1, 5, input_size=3)
    with pytest.raises(LayerError, match="output_padding is only for transposed"):
        ConvProjection(1, 1, 3, input_size=5, output_padding=1)
    with pytest.raises(LayerError, match="ConvProjection: needs input_size"):
        ConvProjection(1, 1, 3)
    with pytest.raises(LayerError, match="ConvOperator: needs input_size"):
        ConvOperator(1, 1, 3)
    with pytest.raises(LayerError, match="vocab_size=0"):
        TableProjection(0, 3)
    with pytest.raises(LayerError, match=r"DotMulOperator: needs 2 non-negative input indices"):
        DotMulOperator(1.0, (0,))


def test_projection_serves_one_layer():
    proj = FullMatrixProjection(3, 2)
    Mixed([proj], name="first")
    with pytest.raises(LayerError, match="already attached to Mixed 'first' as 'proj0'"):
        Mixed([proj], name="second")


def test_conv_operator_checks_filter_width(rng):
    layer = Mixed([None, None], [ConvOperator(2, 3, 3, input_size=4)], name="op")
    image, filters = Arg(np.zeros((2, 32))), Arg(np.zeros((2, 53)))
    with pytest.raises(LayerError, match=r"ConvOperator 'op0': expected filter \(input 1\) of 54"):
        layer(image, filters)
    with pytest.raises(
        LayerError, match=r"Mixed 'op': inputs have different numbers of rows: \[2, 3\]"
    ):
        layer(image, Arg(np.zeros((3, 54))))


# -- Paddle's departures: padded ids, tied output matrices ----------------------------------------
def test_table_id_minus_one_is_no_row(rng):
    layer = randomize(Mixed([TableProjection(6, 3, dtype=F64)], bias=True, dtype=F64), rng)
    w, b = layer.projections[0].weight, layer.bias
    ids = np.array([2, -1, 5, -1, 2])
    y = run_backward(layer, [Arg(ids=ids)], np.ones((5, 3)))
    want = np.where(ids[:, None] >= 0, w.value[ids], 0) + b.value
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(w.grad[:, 0], [0, 0, 2, 0, 0, 1])  # -1 gives no gradient
    check_layer_grad(layer, [Arg(ids=ids)])


def test_output_matrix_ties_with_an_embedding_table(rng):
    vocab, width = 7, 3
    table = TableProjection(vocab, width, dtype=F64)
    Mixed([table], name="emb")
    out = FullMatrixProjection(width, vocab, dtype=F64, weight=table.weight)
    layer = Mixed([out], name="logits")
    h = rng.standard_normal((4, width))
    np.testing.assert_allclose(layer(Arg(h)).value, h @ table.weight.value.T, rtol=1e-12)
    with pytest.raises(LayerError, match=r"shared weight has shape \(7, 3\), needs \(3, 7\)"):
        TransposedFullMatrixProjection(width, vocab, weight=table.weight)


def test_transposed_matrix_ties_with_the_opposite_full_matrix(rng):
    enc = FullMatrixProjection(5, 3, dtype=F64)
    Mixed([enc])
    dec = TransposedFullMatrixProjection(3, 5, dtype=F64, weight=enc.weight)
    layer = Mixed([dec])
    z = rng.standard_normal((2, 3))
    np.testing.assert_allclose(layer(Arg(z)).value, z @ enc.weight.value, rtol=1e-12)


def test_conv_operator_on_an_empty_batch():
    layer = Mixed([None, None], [ConvOperator(2, 3, 3, input_size=4, padding=1)])
    image, filters = Arg(np.zeros((0, 32))), Arg(np.zeros((0, 54)))
    y = layer(image, filters)
    assert y.value.shape == (0, 48)
    y.grad = np.zeros((0, 48))
    layer.backward(lambda p: None)
    assert image.grad.shape == (0, 32) and filters.grad.shape == (0, 54)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_16_bit_table_sums_a_frequent_rows_gradient_in_float32(dtype):
    """numpy adds bfloat16 (float16) in its own type: a row read 4096 times in a batch got a
    gradient of 256 (2048), where each read adds 1; so did a context window's learnt padding,
    read once by every sequence."""
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    n = 4096
    table = Mixed([TableProjection(3, 2, dtype=dtype)], dtype=dtype)
    run_backward(table, [Arg(ids=np.zeros(n, np.int64))], np.ones((n, 2), dtype))
    np.testing.assert_array_equal(table.projections[0].weight.grad[0].astype(F64), [n, n])
    window = ContextProjection(2, 2, -1, trainable_padding=True, dtype=dtype)
    context = Mixed([window], dtype=dtype)
    one_row_each = Arg(np.ones((n, 2), dtype), seq_starts=np.arange(n + 1))
    run_backward(context, [one_row_each], np.ones((n, 4), dtype))
    np.testing.assert_array_equal(window.weight.grad.astype(F64), [[n, n]])
