"""check_network_grad: finite differences of a whole network's loss against its backward."""

import re

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.gradient_check import check_network_grad
from distconv.layers import (
    Concatenate,
    Conv2D,
    FullMatrixProjection,
    FullyConnected,
    MaxPool2D,
    Mixed,
    SoftmaxCrossEntropy,
)
from distconv.layers.base import Layer
from distconv.layers.inputs import grad_target
from distconv.network import NetworkError


class HalvingIdentity(Layer):
    """``y = x``, its backward passing half the gradient down: wrong for every layer below."""

    def _forward(self, x):
        return x.value.copy()

    def _backward(self, dz, callback):
        dx = grad_target(self.inputs[0])
        if dx is not None:
            dx += 0.5 * dz


def model(rng, dtype=np.float32, halving=False):
    """Two convolution branches, pooled and concatenated, a Mixed layer, an FC and a softmax
    cross-entropy, as the docs' models; weights drawn from ``rng``, not the global generator."""
    net = Network()
    net.add("c3", Conv2D(1, 4, 3, padding=1, act="relu", dtype=dtype), "image")
    net.add("c1", Conv2D(1, 4, 1, act="relu", dtype=dtype), "image")
    net.add("p3", MaxPool2D(2), "c3")
    net.add("p1", MaxPool2D(2), "c1")
    net.add("cat", Concatenate(), ["p3", "p1"])  # (N, 2 * 4 * 4 * 4)
    net.add(
        "mix", Mixed([FullMatrixProjection(128, 16, dtype=dtype)], act="tanh", dtype=dtype), "cat"
    )
    top = "mix"
    if halving:
        net.add("half", HalvingIdentity(), "mix")
        top = "half"
    net.add("fc", FullyConnected(16, 5, dtype=dtype), top)
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    for p in net.parameters():
        p.value[...] = rng.standard_normal(p.shape) * 0.5
    return net


def feeds(rng, dtype=np.float32):
    image = Arg(rng.standard_normal((3, 1, 8, 8)).astype(dtype), needs_grad=False)
    return {"image": image, "label": Arg(ids=np.array([1, 4, 0]))}


def test_a_small_model_passes_in_float64_every_parameter_and_the_input_checked(rng):
    net = model(rng)
    report = check_network_grad(net, feeds(rng), inputs=True)
    names = [f"param {p.name}" for p in net.parameters()] + ["input image"]
    assert sorted(report.diffs) == sorted(names)
    assert report.worst < 1e-6


def test_a_layer_that_halves_the_gradient_fails_naming_the_parameter_and_element(rng):
    net = model(rng, halving=True)
    with pytest.raises(AssertionError) as failed:
        check_network_grad(net, feeds(rng))
    said = str(failed.value)
    found = re.search(
        r"^network \(loss 'loss'\): gradient of param c3\.weight\[\d+, 0, \d+, \d+\] is off: "
        r"analytic (\S+), numeric (\S+), relative difference",
        said,
    )
    assert found, said
    analytic, numeric = (float(v) for v in found.groups())
    assert analytic == pytest.approx(numeric / 2, rel=1e-5)  # halved: no rounding, the layer


def test_the_parameters_gradients_and_counts_are_left_as_they_were(rng):
    """A float32 network checked in float64: its arrays, their dtypes and contents, the users
    counted and the firing order are its own again, after a check that passed and after one
    that failed."""
    for halving in (False, True):
        net = model(rng, halving=halving)
        params = net.parameters()
        for p in params:
            p.grad[...] = rng.standard_normal(p.shape)
        net["fc"].bias.shared_count = 3  # as set by hand: the check puts it back too
        before = [(p.value, p.value.copy(), p.grad, p.grad.copy(), p.shared_count) for p in params]
        given = feeds(rng)
        image = given["image"].value.copy()
        if halving:
            with pytest.raises(AssertionError, match="is off"):
                check_network_grad(net, given)
        else:
            check_network_grad(net, given)
        for p, (value, values, grad, grads, count) in zip(params, before, strict=True):
            assert p.value is value and p.value.dtype == np.float32
            assert np.array_equal(value, values) and np.array_equal(grad, grads)
            assert p.grad is grad and p.shared_count == count and not p.static
        assert net.firing_order is None
        assert np.array_equal(given["image"].value, image) and not given["image"].has_grad


def test_the_loss_is_the_only_output_unless_named(rng):
    net = model(rng)
    net.add("probe", FullyConnected(16, 2, dtype=np.float32), "mix")  # read by no layer
    with pytest.raises(NetworkError, match=r"layers \['loss', 'probe'\] are read by no other"):
        check_network_grad(net, feeds(rng))
    with pytest.raises(NetworkError, match=r"loss='nope'\): no such layer"):
        check_network_grad(net, feeds(rng), loss="nope")
    report = check_network_grad(net, feeds(rng), loss="probe", elements=2)
    assert report.diffs["param probe.weight"] < 1e-6
    assert report.diffs["param c3.weight"] < 1e-6
    assert report.diffs["param fc.weight"] == 0.0  # not under the probe: no gradient, none numeric


def test_a_network_with_nothing_to_train_checks_its_inputs_or_is_refused(rng):
    net = model(rng)
    for p in net.parameters():
        p.set_static(True)
    with pytest.raises(ValueError, match=r"nothing to check: no parameter trains \(and inputs="):
        check_network_grad(net, feeds(rng))
    report = check_network_grad(net, feeds(rng), inputs=True)
    assert list(report.diffs) == ["input image"] and report.worst < 1e-6
    assert all(p.static and p.grad is None for p in net.parameters())
    with pytest.raises(TypeError, match=r"dtype=int32\): finite differences need a float type"):
        check_network_grad(net, feeds(rng), dtype=np.int32)
