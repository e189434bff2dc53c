"""The cupy path of what changed since the device tests of ``test_gpu.py`` were written, each
against the same code on numpy: layers whose parameters and inputs differ in dtype (a bias, a
learnt padding or a convolution's weights wider than the input), a Trainer's checkpoints and
resume on device state, a Network's blame of a feed (NaN, integer or bool values) and its
advice for a frozen weight, the gradient checker, and a layer part's settings holding an array.

Skipped where cupy or a CUDA device is missing (CI has none); run them on a GPU machine with
``pytest -m gpu`` (``benchmarks/gpu.py`` does).
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.backend import is_gpu_array, set_device, to_device, to_host
from distconv.gradient_check import check_layer_grad
from distconv.layers import (
    ContextProjection,
    Conv2D,
    ConvOperator,
    ConvProjection,
    ConvTranspose2D,
    FullyConnected,
    IdentityProjection,
    Mixed,
    SelectiveFullyConnected,
    SequenceConcat,
    SoftmaxCrossEntropy,
)
from distconv.layers.base import Layer, LayerTypeError
from distconv.layers.inputs import values_of
from distconv.network import NetworkError
from distconv.optim import create_optimizer
from distconv.sync.description import digest, first_difference
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.kernels.test_gpu import _args, _backward_twins, _ran_on_cudnn, _twins, _use_cudnn
from tests.test_core import _WrongGrad

pytestmark = pytest.mark.gpu

F16, F32, F64 = np.float16, np.float32, np.float64


def _rows(n: int, width: int, dtype=F32, **extra) -> dict:
    """A host spec of ``(n, width)`` values (test_gpu's ``_args`` makes the Args)."""
    values = np.random.default_rng(n * 31 + width).standard_normal((n, width)).astype(dtype)
    return {"value": values, **extra}


def _shared_weight():
    """A float32 weight, made on the current device, that a float64 layer shares."""
    return FullyConnected(6, 5, bias=False).weight


# -- 1. mixed dtypes: (name, layer factory, host specs, output dtype, tolerance) ------------------
# The tolerance is the case's own, relative to the largest value compared (float32 products on
# the device may sum in another order); never below a few of the compared dtype's epsilons
# (a float64 gradient cast to a float32 input's dtype may round the other way).
MIXED = [
    (
        "fully connected, float64 bias under a float32 weight",
        lambda: FullyConnected(6, 5, dtype=F64, weight=_shared_weight()),
        [_rows(4, 6)],
        F64,
        1e-5,
    ),
    *[
        (
            f"selective fc ({method}), float64 bias under a float32 weight",
            lambda method=method: SelectiveFullyConnected(
                6, 5, dtype=F64, weight=_shared_weight(), method=method
            ),
            [_rows(4, 6), {"ids": np.array([[0, 2], [1, 4], [3, 3], [4, 0]])}],
            F64,
            1e-5,
        )
        for method in ("dense", "sparse")
    ],
    (
        "sequence concat, float64 bias under float32 rows",
        lambda: SequenceConcat(3, bias=True, dtype=F64),
        [_rows(5, 3, seq_starts=np.array([0, 2, 5])), _rows(2, 3, seq_starts=np.array([0, 1, 2]))],
        F64,
        1e-12,
    ),
    (
        "context projection, float64 learnt padding under float32 rows",
        lambda: Mixed([ContextProjection(3, 3, -1, trainable_padding=True, dtype=F64)], dtype=F64),
        [_rows(6, 3, seq_starts=np.array([0, 2, 6]))],
        F64,
        1e-12,
    ),
    (
        "conv operator, float64 filters under float32 images",
        lambda: Mixed([None, None], [ConvOperator(2, 3, 2, input_size=3)], dtype=F64),
        [_rows(3, 2 * 9), _rows(3, 3 * 2 * 4, F64)],
        F64,
        1e-10,
    ),
]


def _conv_cases(weights, image, out, tol):
    """A convolution, a transposed one and a projection with ``weights`` under ``image``."""
    return [
        (
            f"conv2d, {np.dtype(weights)} weights under a {np.dtype(image)} image",
            lambda: Conv2D(2, 4, 3, padding=1, dtype=weights),
            [{"value": _rows(2, 50, image)["value"].reshape(2, 2, 5, 5)}],
            out,
            tol,
        ),
        (
            f"transposed conv2d, {np.dtype(weights)} weights under a {np.dtype(image)} image",
            lambda: ConvTranspose2D(2, 3, 3, stride=2, dtype=weights),
            [{"value": _rows(2, 24, image)["value"].reshape(2, 2, 4, 3)}],
            out,
            tol,
        ),
        (
            f"conv projection, {np.dtype(weights)} weights under {np.dtype(image)} rows",
            lambda: Mixed(
                [ConvProjection(2, 3, 3, padding=1, input_size=4, dtype=weights)],
                bias=True,
                dtype=weights,
            ),
            [_rows(3, 2 * 16, image)],
            out,
            tol,
        ),
    ]


# float32 on cuDNN may run on TF32 tensor cores (CuPy asks for no other math): 10-bit mantissas
CONVS = _conv_cases(F64, F32, F64, 1e-10) + _conv_cases(F32, F16, F32, 5e-3)


def _close(device, host, tol: float, what: str) -> None:
    """A device array holds the host array's dtype and, to ``tol`` of the largest, its
    values."""
    assert is_gpu_array(device), what
    device = to_host(device)
    assert device.dtype == host.dtype, f"{what}: {device.dtype} on the device, {host.dtype} here"
    tol = max(tol, 8 * float(np.finfo(host.dtype).eps))
    scale = max(float(np.abs(host.astype(F64)).max(initial=0.0)), 1.0)
    np.testing.assert_allclose(
        device.astype(F64), host.astype(F64), rtol=tol, atol=tol * scale, err_msg=what
    )


def _mixed_case(cupy, rng, make, specs, out, tol) -> None:
    """Forward and backward of one layer on each device, the device's parameters given the
    host's values: the output, input and parameter gradients alike in dtype and values."""
    host, dev = _twins(cupy, rng, make)
    values = [p.value for p in host.parameters()] + [s["value"] for s in specs if "value" in s]
    assert len({v.dtype for v in values}) > 1, "a case of one dtype"
    # the definition: the inputs widened to the output's dtype first (host and device alike
    # may round a float64 weight to a float32 input's dtype: equal to each other, not to it)
    wide = [{**s, "value": s["value"].astype(out)} if "value" in s else s for s in specs]
    defined = host(*_args(wide, np.asarray)).value.copy()
    xs, xd = _args(specs, np.asarray), _args(specs, cupy.asarray)
    y, yd = host(*xs), dev(*xd)
    assert y.value.dtype == out, f"the output's dtype on the host: {y.value.dtype}, not {out}"
    _close(yd.value, y.value, tol, "output")
    _close(yd.value, defined, tol, "output against the inputs widened")
    _backward_twins(cupy, rng, (host, y), (dev, yd))
    for i, (a, b) in enumerate(zip(xs, xd)):
        if a.needs_grad:
            assert a.grad.dtype == a.value.dtype  # an input's gradient in its own dtype
            _close(b.grad, a.grad, tol, f"input {i}'s gradient")
    for p, q in zip(host.parameters(), dev.parameters()):
        assert p.grad.dtype == p.value.dtype
        _close(q.grad, p.grad, tol, f"{p.name}'s gradient")


@pytest.mark.parametrize("name,make,specs,out,tol", MIXED, ids=[c[0] for c in MIXED])
def test_mixed_dtypes_on_device_match_host(cupy, rng, name, make, specs, out, tol):
    _mixed_case(cupy, rng, make, specs, out, tol)


@pytest.mark.parametrize("cudnn", ["1", "0"])
@pytest.mark.parametrize("name,make,specs,out,tol", CONVS, ids=[c[0] for c in CONVS])
def test_convolutions_of_mixed_dtypes_on_device_match_host(
    cupy, monkeypatch, rng, name, make, specs, out, tol, cudnn
):
    """Each convolution computes in ``result_type(input, weight)`` on cuDNN and on im2col."""
    chosen = _use_cudnn(monkeypatch, cudnn)
    _mixed_case(cupy, rng, make, specs, out, tol)
    _ran_on_cudnn(cudnn, chosen)


# -- 2. a Trainer on the device: checkpoints, then a resume --------------------------------------
def _classifier_data(rows: int = 48) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((rows, 6)).astype(F32)
    return {"x": x, "label": (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0)}


def _device_trainer(out_dir, optimizer: str, dtype: str, init_seed: int, **kw) -> Trainer:
    """Two fully connected layers on the device (no convolution: cuDNN's backward may add in
    another order each run), built from ``init_seed``."""
    from distconv.init import set_seed

    set_seed(init_seed)
    net = Network()
    net.add("hidden", FullyConnected(6, 8, act="tanh"), "x")
    net.add("fc", FullyConnected(8, 3), "hidden")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    eps = {"eps": 1e-4} if optimizer == "adam" else {}  # 1e-8 is 0 in float16: refused
    sync = LocalSync(create_optimizer(optimizer, lr=0.05, **eps))
    return Trainer(net, sync, 8, out_dir=out_dir, progress=False, dtype=dtype, **kw)


def _logged(out_dir) -> list[dict]:
    return [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_a_device_run_resumed_mid_epoch_ends_where_an_uninterrupted_one_ends(
    cupy, tmp_path, optimizer, dtype
):
    """Checkpoints of device parameters and optimizer state (the step guard's finite check,
    the counts' check of device buffers) are saved and restored into device state: a run cut
    after step 8 of 12 and resumed in a new model built from another seed ends with the
    weights, optimizer state and logged losses of one that ran straight through."""
    data = _classifier_data()
    whole = _device_trainer(tmp_path / "whole", optimizer, dtype, 0)
    whole.fit(data, epochs=2)
    first = _device_trainer(tmp_path / "split", optimizer, dtype, 0, checkpoint_every=4)
    first.fit(data, epochs=2)
    for m in first.checkpoints.run.manifests():  # as if killed after step 8, in epoch 2
        if m.step > 8:
            m.path.unlink()
    assert first.checkpoints.run.latest().step == 8
    again = _device_trainer(tmp_path / "split", optimizer, dtype, 123, checkpoint_every=4)
    records = again.fit(data, epochs=2, resume=True)
    assert [r["epoch"] for r in records] == [2] and again.pos.step == 12
    tol = {"float32": 1e-6, "float16": 1e-3}[dtype]  # alike unless the device adds otherwise
    for p, q in zip(whole.params, again.params):
        assert is_gpu_array(q.value) and q.value.dtype == np.dtype(dtype), p.name
        np.testing.assert_allclose(to_host(q.value), to_host(p.value), rtol=tol, atol=tol)
    ours, theirs = again.sync.state_dict(), whole.sync.state_dict()
    for name, state in theirs.items():
        for key, value in state.items():
            np.testing.assert_allclose(
                to_host(ours[name][key]), to_host(value), rtol=tol, atol=tol, err_msg=key
            )
    logged, straight = (_logged(tmp_path / run) for run in ("split", "whole"))
    assert [r["epoch"] for r in logged] == [1, 2]
    for a, b in zip(logged, straight):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=tol)


# -- 3. feed blame and a frozen weight's advice --------------------------------------------------
class AddsIntoMask(Layer):
    """Adds its float input into its integer mask in place: numpy's "Cannot cast ufunc 'add'
    output from ...", CuPy 13's "Cannot cast output operand from ..."."""

    num_inputs = 2

    def _forward(self, x, mask):
        keep = mask.value
        keep += x.value
        return x.value * keep


class NegatesMask(Layer):
    """Negates its bool mask: numpy's "The numpy boolean negative ...", CuPy's "The cupy
    boolean negative ..."."""

    num_inputs = 2

    def _forward(self, x, mask):
        return x.value * -mask.value


def _refusal(make, mask_dtype, put) -> NetworkError:
    """The NetworkError of a forward of ``make()`` fed float ``x`` and a ``mask`` of
    ``mask_dtype``, both put on a device by ``put``."""
    net = Network()
    net.add("masked", make(), inputs=["x", "mask"])
    feeds = {"x": Arg(put(np.ones((4, 3)))), "mask": Arg(put(np.ones((4, 3), mask_dtype)))}
    with pytest.raises(NetworkError) as e:
        net.forward(feeds)
    return e.value


@pytest.mark.parametrize(
    "make, mask_dtype", [(AddsIntoMask, np.int64), (NegatesMask, bool)], ids=["int", "bool"]
)
def test_a_mask_the_device_refused_is_named_as_on_the_host(cupy, make, mask_dtype):
    """cupy's words for the refusal differ from numpy's (cupy/_core/_dtype.pyx,
    _routines_math.pyx): the feed must be named all the same, and alike."""
    host = _refusal(make, mask_dtype, np.asarray)
    device = _refusal(make, mask_dtype, cupy.asarray)
    assert f"input 'mask' holds {np.dtype(mask_dtype)} values" in str(device)
    assert str(device) == str(host)
    assert isinstance(device.__cause__, TypeError)


class Gains(Layer):
    """``x * w + b`` per feature, its parameters on the current device, its backward written
    without a thought for frozen weights."""

    def __init__(self, n: int) -> None:
        super().__init__(name="gains")
        self.w = self.new_param("w", to_device(np.linspace(0.5, 1.5, n)))
        self.b = self.new_param("b", to_device(np.zeros(n)))

    def _forward(self, x):
        return values_of(self, x) * self.w.value + self.b.value

    def _backward(self, dz, callback):
        self.w.grad += (dz * self.inputs[0].value).sum(0)
        self.b.grad += dz.sum(0)
        self.w.inc_update(callback)
        self.b.inc_update(callback)


def _frozen_refusal(put) -> str:
    layer = Gains(3)
    layer.b.set_static(True)
    layer.forward(Arg(put(np.ones((2, 3)))))
    layer.output.grad = put(np.ones((2, 3)))
    with pytest.raises(LayerTypeError, match=r"static parameter\(s\) \['gains.b'\]") as e:
        layer.backward(lambda p: None)
    assert "NoneType" in str(e.value.__cause__)
    return str(e.value).split("; ", 1)[1]  # the advice; the cause is in each library's words


def test_adding_into_a_frozen_weight_s_gradient_on_the_device_is_told_as_on_the_host(cupy):
    """cupy refuses ``None += array`` as "Unsupported type <class 'NoneType'>"."""
    set_device("cpu")
    host = _frozen_refusal(np.asarray)
    set_device("gpu")
    assert _frozen_refusal(cupy.asarray) == host
    assert "skip adding into one (if not p.static: p.grad += ...)" in host


class HostMade(Layer):
    """``x * w``, its weight made as a layer of one's own makes it: ``np.ones``, on the host."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.w = self.new_param("w", np.ones(n, F32))

    def _forward(self, x):
        return values_of(self, x) * self.w.value

    def _backward(self, dz, callback):
        if self.inputs[0].needs_grad:
            self.inputs[0].grad += dz * self.w.value
        self.w.grad += (dz * self.inputs[0].value).sum(0)
        self.w.inc_update(callback)


def test_a_weight_given_to_new_param_on_the_host_goes_to_the_device(cupy):
    """It stayed on the host under ``--device gpu``: the first product with a device input
    failed inside the layer. Made on the device, it computes as on the host."""
    x = np.random.default_rng(3).standard_normal((2, 4)).astype(F32)
    set_device("cpu")
    host = HostMade(4)
    assert not is_gpu_array(host.w.value)
    set_device("gpu")
    layer = HostMade(4)
    assert is_gpu_array(layer.w.value) and is_gpu_array(layer.w.grad)
    out = layer.forward(Arg(cupy.asarray(x)))
    np.testing.assert_array_equal(to_host(out.value), host.forward(Arg(x)).value)


# -- 4. a Network's feeds on the device ----------------------------------------------------------
def _classifier() -> Network:
    net = Network()
    net.add("fc", FullyConnected(4, 3), "x")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    return net


def test_a_device_feed_holding_nan_and_inf_is_named_as_on_the_host(cupy):
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(F32)
    x[0, 1], x[1, 3] = np.nan, -np.inf
    said = []
    for device, put in (("cpu", np.asarray), ("gpu", cupy.asarray)):
        set_device(device)
        with pytest.raises(NetworkError, match=r"input 'x' of shape \(2, 4\) holds 2 NaN") as e:
            _classifier().forward({"x": put(x), "label": Arg(ids=put(np.array([0, 2])))})
        said.append(str(e.value))
    assert said[0] == said[1]


class MasksRows(Layer):
    """Reads its float input through ``values_of`` and takes its integer mask as values by its
    own choice."""

    num_inputs = 2

    def _forward(self, x, mask):
        return values_of(self, x) * mask.value


def test_device_integer_feeds_into_a_layer_of_one_s_own_as_on_the_host(cupy):
    """An integer mask the layer multiplies by is taken, giving the host's values; integer
    values where it reads floats (``values_of``) are refused naming that feed, alike."""
    x = np.random.default_rng(1).standard_normal((4, 3))
    mask = np.array([[1, 0, 2]] * 4)
    outs, said = [], []
    for put in (np.asarray, cupy.asarray):
        net = Network()
        net.add("masked", MasksRows(), inputs=["x", "mask"])
        outs.append(to_host(net.forward({"x": put(x), "mask": put(mask)})["masked"].value))
        with pytest.raises(NetworkError, match=r"input 'x' holds int64 values") as e:
            net.forward({"x": put(mask), "mask": put(mask)})
        said.append(str(e.value))
    np.testing.assert_array_equal(outs[1], outs[0])
    np.testing.assert_array_equal(outs[0], x * mask)
    assert said[0] == said[1]


# -- 5. the gradient checker on a device layer --------------------------------------------------
def test_check_layer_grad_of_device_layers_reports_as_on_the_host(cupy):
    """The finite differences of device parameters and inputs: the same arrays checked, and
    within the tolerance, as the host's; a wrong device gradient is caught."""
    x = np.random.default_rng(0).standard_normal((5, 4))
    images = np.random.default_rng(1).standard_normal((2, 2 * 9)).astype(F32)
    reports = []
    for device, put in (("cpu", np.asarray), ("gpu", cupy.asarray)):
        set_device(device)
        fc = FullyConnected(4, 3, dtype=F64, name="fc")
        conv = Mixed([ConvProjection(2, 3, 2, input_size=3, dtype=F64)], bias=True, dtype=F64)
        reports.append(
            (check_layer_grad(fc, [Arg(put(x))]), check_layer_grad(conv, [Arg(put(images))]))
        )
        assert is_gpu_array(fc.weight.value) == (device == "gpu")
    for host, dev in zip(*reports):
        assert dev.diffs.keys() == host.diffs.keys()
    assert reports[1][0].worst <= 1e-6 and reports[1][1].worst <= 2e-2

    class WrongOnDevice(_WrongGrad):
        """Its weight gradient 10% off, its weight on the device."""

        def __init__(self) -> None:
            Layer.__init__(self)
            self.w = self.new_param("w", to_device(np.linspace(0.5, 1.5, 4)))

    with pytest.raises(AssertionError, match=r"gradient of param WrongOnDevice.w.* is off"):
        check_layer_grad(WrongOnDevice(), [Arg(cupy.asarray(x))])


# -- 6. a part's frozen spec holding a device array ----------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class _Keep:
    """A part's frozen spec of one's own, holding an array (over 1000 elements: its repr is
    summarised)."""

    mask: object


class KeepsColumns(IdentityProjection):
    """The identity, with a spec of one's own that the job check must read."""

    def __init__(self, mask) -> None:
        super().__init__(4)
        self.keep = _Keep(mask)


def _structure(mask) -> dict:
    net = Network()
    net.add("mix", Mixed([KeepsColumns(mask)]), "x")
    return net.structure()


def test_a_part_s_spec_holding_a_device_array_agrees_with_the_host_s(cupy):
    """Two ranks, one holding the mask on the device, agree where the values do (the job
    check writes a device array as a host one: its dtype, shape and a hash of its values) and
    are told apart by a value in the middle."""
    mask = np.zeros(2000, F32)
    host, device = _structure(mask), _structure(cupy.asarray(mask))
    assert json.dumps(device, sort_keys=True) == json.dumps(host, sort_keys=True)
    assert digest(device) == digest(host)
    assert device["mix"]["projections"][0]["keep"]["mask"]["shape"] == [2000]
    middle = mask.copy()
    middle[1000] = 1
    said = first_difference(host, _structure(cupy.asarray(middle)))
    assert said is not None and said.startswith("mix.projections: ") and "values_sha256" in said
