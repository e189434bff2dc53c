"""The cupy path: every layer family on the device, against the same layer on numpy.

Convolutions and FC run with cuDNN and with im2col, pooling on its own kernels (it has no cuDNN
path); the catalogue below adds
projections, operators, sequences, selective FC, multiplex, expand and concatenation.

Skipped where cupy or a CUDA device is missing (CI has none); run them on a GPU machine with
``pytest -m gpu``. Layers of mixed dtypes, a Trainer's resume, a feed's blame, the gradient
checker and a part's settings on the device are in ``test_gpu_since_audit.py``.
"""

import numpy as np
import pytest

from distconv import Arg
from distconv.backend import set_device, to_host
from distconv.kernels import cudnn as cudnn_kernels
from distconv.layers import (
    Activation,
    AvgPool2D,
    AvgPool3D,
    Concatenate,
    Concatenate2,
    ContextProjection,
    Conv2D,
    Conv3D,
    ConvOperator,
    ConvProjection,
    ConvTranspose2D,
    ConvTranspose3D,
    ConvTransposeProjection,
    DotMulOperator,
    DotMulProjection,
    FeatureMapExpand,
    FullMatrixProjection,
    FullyConnected,
    IdentityProjection,
    MaxPool2D,
    MaxPool3D,
    Mixed,
    MSELoss,
    Multiplex,
    ScalingProjection,
    SelectiveFullyConnected,
    SequenceConcat,
    SequencePool,
    SliceProjection,
    SoftmaxCrossEntropy,
    TableProjection,
    TransposedFullMatrixProjection,
)

pytestmark = pytest.mark.gpu


LAYERS = [
    lambda: Conv2D(4, 8, 3, padding=1, groups=2, act="relu", dtype=np.float64),
    lambda: Conv2D(4, 8, 3, stride=2, dilation=2, padding=2, dtype=np.float64),
    lambda: ConvTranspose2D(4, 8, 3, stride=2, padding=1, output_padding=1, dtype=np.float64),
    lambda: Conv3D(4, 4, 3, padding=1, dtype=np.float64),
    lambda: ConvTranspose3D(4, 4, 3, stride=2, padding=1, dtype=np.float64),
    lambda: FullyConnected(4 * 6 * 6, 5, act="softmax", dtype=np.float64),
]
POOLS = [
    lambda: MaxPool2D(3, 2, 1),
    lambda: MaxPool2D(2),  # windows tile the input: the backward writes instead of adding
    lambda: AvgPool2D(3, 2, 1),
    lambda: AvgPool2D(2),
    lambda: MaxPool3D(3, 2, 1),
    lambda: AvgPool3D(2),
]


def _use_cudnn(monkeypatch, flag: str) -> list[bool]:
    """Run the conv parts on cuDNN (``"1"``) or on the device's im2col (``"0"``).

    A cuDNN case skips where there is no cuDNN (CuPy 14 removed it), instead of passing on
    im2col; the list returned records every choice between the two, so that a cuDNN case can
    check that no convolution fell back to im2col (:func:`_ran_on_cudnn`).
    """
    if flag == "1" and not cudnn_kernels.available():
        pytest.skip(f"no cuDNN ({cudnn_kernels.unavailable_reason()}): im2col runs instead")
    monkeypatch.setenv("DISTCONV_CUDNN", flag)
    chosen: list[bool] = []
    usable = cudnn_kernels.usable

    def recorded(*arrays, **shapes):
        chosen.append(usable(*arrays, **shapes))
        return chosen[-1]

    monkeypatch.setattr(cudnn_kernels, "usable", recorded)
    return chosen


def _ran_on_cudnn(flag: str, chosen: list[bool]) -> None:
    """In a cuDNN case, every convolution the layer ran went to cuDNN (none fell back)."""
    if flag == "1":
        assert all(chosen), f"a convolution fell back to im2col ({chosen.count(False)} times)"


@pytest.mark.parametrize("cudnn", ["1", "0"])
@pytest.mark.parametrize("make", LAYERS)
def test_device_matches_host(cupy, monkeypatch, rng, make, cudnn):
    chosen = _use_cudnn(monkeypatch, cudnn)
    _device_matches_host(cupy, rng, make)
    _ran_on_cudnn(cudnn, chosen)


@pytest.mark.parametrize("cudnn", ["1", "0"])
@pytest.mark.parametrize("make", LAYERS[:5])
def test_an_empty_batch_on_the_device(cupy, monkeypatch, make, cudnn):
    """An empty batch runs on im2col whatever the switch says: cuDNN refuses a zero dimension
    (``cudnn.usable``); its output and gradients are empty and the weights' zero."""
    if cudnn == "1" and not cudnn_kernels.available():
        pytest.skip(f"no cuDNN ({cudnn_kernels.unavailable_reason()})")
    monkeypatch.setenv("DISTCONV_CUDNN", cudnn)
    layer = make()
    x = Arg(cupy.zeros((0, 4, *(6,) * layer.nd)))
    y = layer(x)
    assert y.value.shape[0] == 0
    y.grad = cupy.zeros_like(y.value)
    layer.backward(lambda p: None)
    assert x.grad.shape == x.value.shape
    assert all(not to_host(p.grad).any() for p in layer.parameters())


@pytest.mark.parametrize("make", POOLS)
def test_pooling_on_the_device_matches_host(cupy, rng, make):
    _device_matches_host(cupy, rng, make)


def _device_matches_host(cupy, rng, make):
    set_device("cpu")
    host = make()
    shape = (2, 4, 6, 6, 6) if "3D" in type(host).__name__ else (2, 4, 6, 6)
    x = rng.standard_normal(shape)
    set_device("gpu")
    dev = make()
    for p, q in zip(host.parameters(), dev.parameters()):
        q.value[...] = cupy.asarray(p.value)
    xa, xd = Arg(x), Arg(cupy.asarray(x))
    y = host(xa).value
    yd = dev(xd).value
    assert isinstance(yd, cupy.ndarray)
    np.testing.assert_allclose(to_host(yd), y, rtol=1e-10, atol=1e-10)
    dy = rng.standard_normal(y.shape)
    host.output.grad = dy
    dev.output.grad = cupy.asarray(dy)
    host.backward(lambda p: None)
    dev.backward(lambda p: None)
    np.testing.assert_allclose(to_host(xd.grad), xa.grad, rtol=1e-8, atol=1e-10)
    for p, q in zip(host.parameters(), dev.parameters()):
        np.testing.assert_allclose(to_host(q.grad), p.grad, rtol=1e-8, atol=1e-10)


# -- the whole catalogue: every layer family on the device against numpy --------------------------
# Each case is (name, layer factory, inputs). An input is a dict of host arrays: "value" (gets a
# gradient), "ids" and "seq_starts". The same layer is built on each device, the device copy
# takes the host's parameter values, and forward, input gradients and parameter gradients must
# agree (float64).
F64 = np.float64
SEQ = np.array([0, 3, 3, 4, 9])  # uneven, one empty, one of length 1


def _rows(n, width, **extra):
    return {"value": np.random.default_rng(n * 31 + width).standard_normal((n, width)), **extra}


def _ids(values, **extra):
    return {"ids": np.asarray(values), **extra}


CATALOGUE = [
    (
        "matrix projections, bias, tanh",
        lambda: Mixed(
            [
                FullMatrixProjection(6, 4, dtype=F64),
                TransposedFullMatrixProjection(5, 4, dtype=F64),
            ],
            bias=True,
            act="tanh",
            dtype=F64,
        ),
        [_rows(7, 6), _rows(7, 5)],
    ),
    (
        "element-wise and slice projections",
        lambda: Mixed(
            [
                DotMulProjection(5, dtype=F64),
                ScalingProjection(5, dtype=F64),
                IdentityProjection(8, 5, offset=2),
                SliceProjection(6, [(4, 6), (0, 3)]),
            ],
            dtype=F64,
        ),
        [_rows(4, 5), _rows(4, 5), _rows(4, 8), _rows(4, 6)],
    ),
    (
        "table projection with id -1",
        lambda: Mixed([TableProjection(9, 4, dtype=F64)], bias=True, dtype=F64),
        [_ids([3, -1, 8, 3, 0, -1, 3])],
    ),
    (
        "context projection, trainable padding",
        lambda: Mixed([ContextProjection(3, 4, trainable_padding=True, dtype=F64)], dtype=F64),
        [_rows(9, 3, seq_starts=SEQ)],
    ),
    (
        "context projection, zero padding",
        lambda: Mixed([ContextProjection(3, 3, 1, dtype=F64)], act="relu", dtype=F64),
        [_rows(9, 3, seq_starts=SEQ)],
    ),
    (
        "conv and transposed conv projections, shared bias",
        lambda: Concatenate2(
            [
                ConvProjection(2, 4, 3, input_size=(5, 5), padding=1, groups=2, dtype=F64),
                ConvTransposeProjection(2, 2, 3, input_size=(3, 3), stride=2, padding=1, dtype=F64),
            ],
            bias=True,
            shared_bias=True,
            dtype=F64,
        ),
        [_rows(3, 2 * 25), _rows(3, 2 * 9)],
    ),
    (
        "conv and dot-mul operators",
        lambda: Mixed(
            [None, None, None],
            [ConvOperator(2, 3, 3, input_size=(4, 4), padding=1), DotMulOperator(0.5, (2, 2))],
            size=48,
            dtype=F64,
        ),
        [_rows(3, 2 * 16), _rows(3, 3 * 2 * 9), _rows(3, 48)],
    ),
    (
        "selective fc, two inputs, table selection, sparse",
        lambda: SelectiveFullyConnected((4, 6), 40, method="sparse", dtype=F64),
        [_rows(5, 4), _rows(5, 6), _ids(np.arange(15).reshape(5, 3) * 2)],
    ),
    (
        "selective fc, CSR selection, dense, softmax",
        lambda: SelectiveFullyConnected(4, 12, act="softmax", method="dense", dtype=F64),
        [_rows(3, 4), _ids([1, 5, 5, 0, 11, 2], seq_starts=np.array([0, 2, 4, 6]))],
    ),
    (  # no column at all: compact_columns counted them by cupy's bincount, which takes the
        # max of its input first ("zero-size array to reduction operation")
        "selective fc, empty selection, softmax",
        lambda: SelectiveFullyConnected(4, 6, act="softmax", method="sparse", dtype=F64),
        [_rows(3, 4), _ids(np.zeros((3, 0), np.int64))],
    ),
    (
        "selective fc, empty CSR selection, dense",
        lambda: SelectiveFullyConnected(4, 6, method="dense", dtype=F64),
        [_rows(3, 4), _ids(np.zeros(0, np.int64), seq_starts=np.zeros(4, np.int64))],
    ),
    (
        "selective fc, full output",
        lambda: SelectiveFullyConnected(4, 6, dtype=F64),
        [_rows(3, 4)],
    ),
    (
        "sequence concat with bias",
        lambda: SequenceConcat(3, bias=True, dtype=F64),
        [_rows(9, 3, seq_starts=SEQ), _rows(6, 3, seq_starts=np.array([0, 1, 3, 3, 6]))],
    ),
    (
        "multiplex",
        lambda: Multiplex(act="sigmoid"),
        [_ids([2, 0, 0, 1, 2, 1]), _rows(6, 4), _rows(6, 4), _rows(6, 4)],
    ),
    ("feature map expand, row", lambda: FeatureMapExpand(3), [_rows(4, 5)]),
    ("feature map expand, column", lambda: FeatureMapExpand(3, as_row_vector=False), [_rows(4, 5)]),
    ("concatenate", lambda: Concatenate(act="tanh"), [_rows(4, 3), _rows(4, 2)]),
    ("activation layer", lambda: Activation("sigmoid"), [_rows(4, 5)]),
    ("mean squared error", lambda: MSELoss(), [_rows(4, 3), {"value": _rows(3, 4)["value"].T}]),
]


def _args(specs, to):
    """Args on one device from host specs (``to`` moves an array there)."""
    return [
        Arg(
            None if s.get("value") is None else to(s["value"]),
            ids=None if s.get("ids") is None else to(s["ids"]),
            seq_starts=None if s.get("seq_starts") is None else to(s["seq_starts"]),
        )
        for s in specs
    ]


@pytest.mark.parametrize("cudnn", ["1", "0"])  # the conv parts on cuDNN and on device im2col
@pytest.mark.parametrize("name,make,specs", CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_catalogue_on_device_matches_host(cupy, monkeypatch, rng, name, make, specs, cudnn):
    chosen = _use_cudnn(monkeypatch, cudnn)
    _catalogue_case(cupy, rng, make, specs)
    _ran_on_cudnn(cudnn, chosen)


@pytest.mark.parametrize("cudnn", ["1", "0"])
def test_1d_convolutions_run_on_im2col_and_match_host(cupy, monkeypatch, rng, cudnn):
    """cuDNN's tensors have at least 4 dimensions: a 1-D convolution runs on the im2col kernels
    whatever the switch says (``cudnn.usable``)."""
    chosen = _use_cudnn(monkeypatch, cudnn)
    make = lambda: Mixed(  # noqa: E731
        [None, None, ConvProjection(2, 6, 3, input_size=(5,), padding=1, groups=2, dtype=F64)],
        [ConvOperator(2, 6, 3, input_size=(5,), padding=1)],
        size=30,
        dtype=F64,
    )
    _catalogue_case(cupy, rng, make, [_rows(3, 2 * 5), _rows(3, 6 * 2 * 3), _rows(3, 2 * 5)])
    assert chosen and not any(chosen)


def _twins(cupy, rng, make):
    """The layer ``make`` makes on the host and on the device, their parameters given the same
    random values (zero-initialised padding and bias too)."""
    set_device("cpu")
    host = make()
    set_device("gpu")
    dev = make()
    for p, q in zip(host.parameters(), dev.parameters()):
        p.value[...] = rng.standard_normal(p.shape)
        q.value[...] = cupy.asarray(p.value)
    return host, dev


def _backward_twins(cupy, rng, host, dev) -> None:
    """Backward of the ``(layer, output)`` pairs ``host`` and ``dev`` from one random output
    gradient (on the device, its copy)."""
    (layer, y), (layer_d, yd) = host, dev
    dy = rng.standard_normal(y.value.shape).astype(y.value.dtype)
    y.grad, yd.grad = dy, cupy.asarray(dy)
    layer.backward(lambda p: None)
    layer_d.backward(lambda p: None)


def _catalogue_case(cupy, rng, make, specs, rtol=None):
    """One case of the catalogue: forward and gradients on the device match the host's (to
    ``rtol``, absolute too, where given: 16-bit layers)."""
    host, dev = _twins(cupy, rng, make)
    xs, xd = _args(specs, np.asarray), _args(specs, cupy.asarray)
    y, yd = host(*xs), dev(*xd)
    assert isinstance(yd.value, cupy.ndarray)
    forward, backward = ((1e-10, 1e-12), (1e-8, 1e-10)) if rtol is None else [(rtol, rtol)] * 2
    np.testing.assert_allclose(to_host(yd.value), y.value, *forward)
    if y.ids is not None:
        np.testing.assert_array_equal(to_host(yd.ids), y.ids)
    _backward_twins(cupy, rng, (host, y), (dev, yd))
    for i, (a, b) in enumerate(zip(xs, xd)):
        if a.needs_grad:
            np.testing.assert_allclose(to_host(b.grad), a.grad, *backward, err_msg=i)
    for p, q in zip(host.parameters(), dev.parameters()):
        np.testing.assert_allclose(to_host(q.grad), p.grad, *backward, err_msg=p.name)


def _half_rows(n, width, **extra):
    rows = _rows(n, width, **extra)
    return {**rows, "value": rows["value"].astype(np.float16)}


#: 16-bit tables: their rows' gradients are summed on the device by a branch of its own
#: (``rows.RowScatter``: atomic adds into a float32 sum per distinct row, not into the table)
HALF = [
    (
        "float16 table, repeated ids",
        lambda: Mixed([TableProjection(5, 3, dtype=np.float16)], dtype=np.float16),
        [_ids([1, 4, 1, 1, -1, 0, 1])],
    ),
    (
        "float16 context projection, trainable padding",
        lambda: Mixed(
            [ContextProjection(3, 4, trainable_padding=True, dtype=np.float16)], dtype=np.float16
        ),
        [_half_rows(9, 3, seq_starts=SEQ)],
    ),
]


@pytest.mark.parametrize("name,make,specs", HALF, ids=[c[0] for c in HALF])
def test_16_bit_rows_on_device_match_host(cupy, rng, name, make, specs):
    _catalogue_case(cupy, rng, make, specs, rtol=2e-3)  # float16's eps is 1e-3


@pytest.mark.parametrize("make", POOLS[:2])  # overlapping windows with padding, and tiling
def test_max_pooling_routes_nan_and_inf_on_device_as_on_host(cupy, rng, make):
    """The windows ``pool_rare.RareWindows`` routes (a NaN maximum, ``-inf`` tied with the
    padding, an inf or NaN in ``dy``) are found on the device by a branch of their own: one
    read of two flags."""
    set_device("cpu")
    host = make()
    set_device("gpu")
    dev = make()
    x = rng.standard_normal((2, 4, 6, 6))
    x[0, 0, 1, 1] = np.nan
    x[1, 1, :3, :3] = -np.inf  # whole windows of -inf, beside the padding
    xa, xd = Arg(x), Arg(cupy.asarray(x))
    y, yd = host(xa).value, dev(xd).value
    np.testing.assert_allclose(to_host(yd), y, rtol=0, atol=0)  # NaN where the host has NaN
    dy = rng.standard_normal(y.shape)
    dy[0, 2, 0, 0], dy[1, 3, 1, 1] = np.inf, np.nan
    host.output.grad, dev.output.grad = dy, cupy.asarray(dy)
    host.backward(lambda p: None)
    dev.backward(lambda p: None)
    np.testing.assert_allclose(to_host(xd.grad), xa.grad, rtol=1e-12, atol=0)


def test_an_inf_input_gives_the_weight_gradient_of_the_host_on_device_im2col(
    cupy, monkeypatch, rng
):
    """Wide columns (a 3-D convolution on 10^3 images runs per sample, wide) read past each
    row's end, where an inf meets zeros: NaN the definition does not have. The weight gradient
    is checked on the device too (``finite.exact_if_not_finite``) and computed again."""
    monkeypatch.setenv("DISTCONV_CUDNN", "0")  # cuDNN builds no wide columns
    make = lambda: Conv3D(2, 2, 3, padding=1, dtype=np.float64)  # noqa: E731
    set_device("cpu")
    host = make()
    set_device("gpu")
    dev = make()
    dev.weight.value[...] = cupy.asarray(host.weight.value)
    x = rng.standard_normal((2, 2, 10, 10, 10))
    x[1, 0, 4, 4, 9] = np.inf  # the last column of a row: its neighbour is the junk
    xa, xd = Arg(x), Arg(cupy.asarray(x))
    y, yd = host(xa).value, dev(xd).value
    np.testing.assert_allclose(to_host(yd), y, rtol=1e-10, atol=1e-12)
    dy = rng.standard_normal(y.shape)
    host.output.grad, dev.output.grad = dy, cupy.asarray(dy)
    host.backward(lambda p: None)
    dev.backward(lambda p: None)
    np.testing.assert_allclose(to_host(dev.weight.grad), host.weight.grad, rtol=1e-8, atol=1e-10)
    # the definition: inf where a tap reaches the inf, and nowhere NaN (the host retried too)
    assert np.isinf(host.weight.grad).any() and not np.isnan(host.weight.grad).any()


@pytest.mark.parametrize("labels_on", ["host", "device"])
def test_the_loss_takes_host_or_device_labels_beside_device_logits(cupy, rng, labels_on):
    """A hand-written loop may keep its labels on the host (the Trainer moves its feeds):
    the loss read them with their own module, so a numpy index met cupy logits (suspected
    in review; not run here without a device)."""
    logits, labels = rng.standard_normal((5, 4)), np.array([3, 0, 1, 1, 2])
    host = SoftmaxCrossEntropy()
    expected = host(Arg(logits, needs_grad=True), Arg(ids=labels))
    host.output.grad = np.float64(1.0)
    host.backward(lambda p: None)
    dev = SoftmaxCrossEntropy()
    z = Arg(cupy.asarray(logits), needs_grad=True)
    loss = dev(z, Arg(ids=labels if labels_on == "host" else cupy.asarray(labels)))
    assert isinstance(loss.value, cupy.ndarray)
    np.testing.assert_allclose(float(loss.value), float(expected.value), rtol=1e-12)
    dev.output.grad = cupy.asarray(1.0)
    dev.backward(lambda p: None)
    np.testing.assert_allclose(to_host(z.grad), host.inputs[0].grad, rtol=1e-10, atol=1e-12)


def test_mpi_sync_device_buckets_over_two_ranks(cupy, tmp_path):
    """MPISync's device path under a real ``mpiexec -n 2`` on cupy itself: device buckets
    staged through host buffers, with and without the communication thread, on a native and a
    float16 wire, end as the same training on host arrays (to float32's rounding: cupy's
    kernels may round otherwise than numpy's), bitwise alike on both ranks (which share a
    device where there is only one). CI runs it with a stand-in for cupy
    (``tests/mpi/test_device_buckets.py``)."""
    from tests.mpi.common import mpiexec
    from tests.mpi.test_device_buckets import check_device_runs, device_runs

    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    if mpiexec() is None:
        pytest.skip("mpiexec is not installed")
    check_device_runs(device_runs(tmp_path, "gpu"), rtol=1e-5)


@pytest.mark.parametrize(
    "specs",
    [
        [_rows(9, 3, seq_starts=SEQ)],
        # the max's ties: equal rows within a sequence, the first takes the gradient
        [{"value": np.repeat(_rows(5, 3)["value"], 2, axis=0), "seq_starts": np.array([0, 4, 10])}],
        [_rows(0, 3, seq_starts=np.zeros(3, np.int64))],  # every sequence empty
    ],
    ids=["uneven", "ties", "all empty"],
)
@pytest.mark.parametrize("mode", ["average", "sum", "max", "last", "first"])
def test_sequence_pool_on_device_matches_host(cupy, rng, mode, specs):
    """Each mode's scatters (``add.at``, and int64 ``maximum.at`` and ``minimum.at`` for the
    max) and gathers on the device, against numpy."""
    _catalogue_case(cupy, rng, lambda: SequencePool(mode), specs)


def _narrow_ties(dtype):
    """Rows of few values (ties in every column), a NaN, and -0.0 before 0.0, in ``dtype``."""
    value = np.round(_rows(10, 3)["value"] * 2) / 2
    value[2, 1], value[4:, 2] = np.nan, [-0.0, 0.0, -1, -0.5, -1, -0.0]  # -0.0 the first max
    return {"value": value.astype(dtype), "seq_starts": np.array([0, 4, 4, 10])}


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("mode", ["max", "last", "first"])
def test_sequence_pool_picks_on_device_in_narrow_floats(cupy, rng, mode, dtype):
    """The max's uint32 keys of float32 and of float16 (widened from its 16 bits), scattered
    on the device, against the host's ``maximum.reduceat``: rows picked, so exactly."""
    _catalogue_case(cupy, rng, lambda: SequencePool(mode), [_narrow_ties(dtype)], rtol=0)
