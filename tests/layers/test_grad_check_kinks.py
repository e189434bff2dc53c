"""A gradient check across the kinks of ReLUs and max pools, and at them.

Across: float32's step of 1e-3 crossed several of them under one weight of a convolution, and
a right backward was called wrong (at 25 of 100 seeds with no second comparison, at 3 with a
retry at a ten times smaller step: 12, 45 and 47); a wrong one is still caught.

At: a ReLU input exactly 0 or tied maxima (a fresh convolution's zero bias over a zero
background) is a kink at the point checked, whose one-sided slopes part at any step. A right
backward there was called off, in float64 too; it is refused as one that cannot be judged at
this point, and a gradient outside the slopes, or wrong off the kink, still fails as off."""

import tracemalloc

import numpy as np
import pytest

from distconv import Arg
from distconv.finite_differences import KinkHere
from distconv.gradient_check import check_layer_grad, check_network_grad
from distconv.layers import Activation, Conv2D, MaxPool2D
from distconv.layers.base import Layer
from distconv.layers.inputs import grad_target
from tests.layers.test_network_grad_check import feeds, model

#: seeds at which the float32 check of the right model crossed a kink at step 1e-3
KINKED = [1, 4, 10, 12, 15, 19, 27, 29, 45, 47]


@pytest.mark.parametrize("seed", KINKED)
def test_a_right_backward_passes_in_float32_across_kinks(seed):
    rng = np.random.default_rng(seed)
    net, given = model(rng), feeds(rng)
    report = check_network_grad(net, given, inputs=True, dtype=None)
    assert report.worst <= 2e-2


@pytest.mark.parametrize("seed", KINKED)
def test_a_halved_gradient_still_fails_in_float32(seed):
    rng = np.random.default_rng(seed)
    net, given = model(rng, halving=True), feeds(rng)
    with pytest.raises(AssertionError, match=r"gradient of param c3\.weight.* is off"):
        check_network_grad(net, given, dtype=None)


class Ramp(Layer):
    """``y = max(x, 0)``; its backward ``scale * dz`` where ``x > 0`` and ``at_zero * dz`` where
    ``x == 0`` (0 is relu'(0) by PyTorch's convention, 1 the right slope's: both right there)."""

    def __init__(self, scale: float = 1.0, at_zero: float = 0.0) -> None:
        super().__init__()
        self.scale, self.at_zero = scale, at_zero

    def _forward(self, x):
        return np.maximum(x.value, 0.0)

    def _backward(self, dz, callback):
        dx = grad_target(self.inputs[0])
        if dx is not None:
            x = self.inputs[0].value
            dx += dz * np.where(x > 0, self.scale, np.where(x == 0, self.at_zero, 0.0))


def _zeros(shape: tuple, dtype=np.float64) -> list[Arg]:
    return [Arg(np.zeros(shape, dtype), needs_grad=True)]


def _zero_background(rng) -> np.ndarray:
    """Two 8x8 images, ink in the middle and exact zeros around, as MNIST's digits."""
    image = np.zeros((2, 1, 8, 8))
    image[:, :, 2:6, 3:6] = rng.random((2, 1, 4, 3))
    return image


AT_THE_POINT = "cannot be judged at this point: it is a kink of f"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(
    "layer, shape",
    [
        pytest.param(lambda: MaxPool2D(2), (1, 1, 2, 2), id="tied maxima"),
        pytest.param(lambda: Activation("relu"), (1, 3), id="ReLU at 0"),
        pytest.param(lambda: Ramp(at_zero=1.0), (1, 3), id="ReLU at 0, right slope"),
    ],
)
def test_a_right_gradient_at_a_kink_cannot_be_judged_not_off(layer, shape, dtype):
    """On zeros, in float64 and (judged by float64's redo) in float32: refused, saying why
    and what to do, where it was called off."""
    given = _zeros(shape, dtype)
    with pytest.raises(KinkHere, match=AT_THE_POINT) as refused:
        check_layer_grad(layer(), given)
    np.testing.assert_array_equal(given[0].value, np.zeros(shape, dtype), strict=True)
    words = str(refused.value)
    assert "a ReLU's input is exactly 0 or maxima tie (a zero bias over zero inputs)" in words
    assert "draw the biases away from 0, or add noise to the inputs" in words
    assert "a wrong gradient is refused here as a right one is" in words  # no verdict on it


def test_a_fresh_relu_convolution_on_a_zero_background_cannot_be_judged_until_moved_off(rng):
    """Its zero bias over the zeros around the ink puts ReLU inputs at 0: refused there, it
    passes once the bias is drawn away from 0, as the message advises."""
    conv, image = Conv2D(1, 4, 3, padding=1, act="relu", dtype=np.float64), _zero_background(rng)
    with pytest.raises(KinkHere, match=r"param Conv2D\.bias " + AT_THE_POINT):
        check_layer_grad(conv, [Arg(image.copy(), needs_grad=False)])
    conv.bias.value[...] = rng.uniform(0.5, 1.0, conv.bias.shape) * rng.choice([-1, 1], 4)
    assert check_layer_grad(conv, [Arg(image, needs_grad=False)]).worst <= 1e-6


@pytest.mark.parametrize("at_zero", [-1.0, 2.0])
def test_a_gradient_outside_the_slopes_at_a_kink_is_refused_there_and_off_once_moved(at_zero):
    """Each entry's slopes at 0 are r and 0: -r or 2r is no side's, yet a right derivative of an
    entry moving several kinks need not lie between them either, so the point is refused (never
    passed); off the kink the same wrong gradient fails as off."""
    with pytest.raises(KinkHere, match=AT_THE_POINT):
        check_layer_grad(Ramp(at_zero=at_zero), _zeros((1, 3)))
    ramp = Ramp(at_zero=at_zero, scale=0.5)
    with pytest.raises(AssertionError, match=r"Ramp: gradient of input 0 is off"):
        check_layer_grad(ramp, [Arg(np.full((1, 3), 0.75), needs_grad=True)])


@pytest.mark.parametrize("seed", range(4))
def test_a_right_input_gradient_under_a_zero_bias_convolution_is_never_called_off(seed):
    """One input pixel on a zero background moves several ReLU inputs at 0: the right input
    gradient was called off at 3 of 4 seeds; it is refused as one that cannot be judged."""
    rng = np.random.default_rng(seed)
    conv, image = Conv2D(1, 4, 3, padding=1, act="relu", dtype=np.float64), _zero_background(rng)
    with pytest.raises(KinkHere, match=AT_THE_POINT):
        check_layer_grad(conv, [Arg(image, needs_grad=True)], seed=seed)


def test_a_halved_gradient_off_the_kink_is_still_off(rng):
    x = rng.uniform(0.5, 1.0, (2, 3)) * rng.choice([-1, 1], (2, 3))
    assert check_layer_grad(Ramp(), [Arg(x.copy(), needs_grad=True)]).worst <= 1e-6
    with pytest.raises(AssertionError, match=r"Ramp: gradient of input 0 is off"):
        check_layer_grad(Ramp(scale=0.5), [Arg(x, needs_grad=True)])


def test_a_wrong_gradient_off_the_kinks_is_named_before_a_kink_is_refused(rng):
    """Some entries at 0, the others halved: the direction crosses the kinks and cannot be
    judged, but the halved entries are checked after it and fail as off."""
    x = np.zeros((1, 6))
    x[0, 3:] = rng.uniform(0.5, 1.0, 3)
    with pytest.raises(AssertionError, match=r"Ramp: gradient of input 0\[0, [345]\] is off"):
        check_layer_grad(Ramp(scale=0.5), [Arg(x, needs_grad=True)])


def test_a_gradient_wrong_off_the_kinks_is_off_though_no_entry_drawn_is_wrong(rng):
    """95 of 100 entries at 0, the other 5 halved: the direction crosses the kinks, and the 6
    entries the seed draws miss the halved ones; each entry is judged alone before a refusal
    stands, and a halved one fails as off (it was refused as one that cannot be judged)."""
    x = np.zeros((1, 100))
    x[0, :5] = rng.uniform(0.5, 1.0, 5)
    with pytest.raises(AssertionError, match=r"Ramp: gradient of input 0\[0, [0-4]\] is off"):
        check_layer_grad(Ramp(scale=0.5), [Arg(x, needs_grad=True)], seed=1)


@pytest.mark.parametrize(
    "shape, said",
    [
        ((1, 100), r"\(100 of its 100 entries judged alone: none off\)$"),
        (
            (3, 100),
            r"\(256 of its 300 entries judged alone: none off; the others are not judged\)$",
        ),
    ],
)
def test_a_refusal_says_how_many_entries_were_judged_alone(shape, said):
    with pytest.raises(KinkHere, match=said):
        check_layer_grad(Activation("relu"), _zeros(shape))


def test_elements_past_the_entries_judged_alone_add_none_before_a_refusal():
    """300 entries drawn are more than a refusal judges alone: none is added (a count below
    zero cut the array's other entries short of their last 44, and judged 956 of 1000)."""
    said = r"\(300 of its 1000 entries judged alone: none off; the others are not judged\)$"
    with pytest.raises(KinkHere, match=said):
        check_layer_grad(Activation("relu"), _zeros((1, 1000)), elements=300)


def test_the_entries_judged_alone_keep_no_arrays_of_their_refusals():
    """Each entry's refusal held its frames' arrays in its traceback: 256 of them kept for a
    1e6-entry ReLU input took 6 GB. The check's peak stays within a few dozen of the array."""
    size = 50_000 * 8  # bytes of the (1, 50000) float64 input
    tracemalloc.start()
    try:
        with pytest.raises(KinkHere, match=AT_THE_POINT):
            check_layer_grad(Activation("relu"), _zeros((1, 50_000)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 * size, f"peak {peak / 1e6:.0f} MB"


@pytest.mark.parametrize("seed", [1, 2, 4])
def test_a_right_float32_max_pool_on_many_tied_zeros_cannot_be_judged_not_off(seed):
    """Along 8192 entries through 2048 tied windows the analytic derivative lies far outside
    the slopes (a sum of one side's slope at each), and float32's tolerance of 0.02 at its
    scale took their gap for no parting: a right max pool was called off."""
    with pytest.raises(KinkHere, match=AT_THE_POINT):
        check_layer_grad(MaxPool2D(2), _zeros((4, 8, 16, 16), np.float32), seed=seed)


def test_the_entries_judged_after_a_refusal_call_no_right_input_off():
    """A fresh ReLU convolution's input pixel on the zero background moves several ReLU
    inputs at 0 at once, whose conventions' sum need not lie between its slopes: judged alone
    after the refusal (no entry drawn before it), such a pixel of a right network was called
    off."""
    from distconv import Network
    from distconv.layers import FullyConnected, SoftmaxCrossEntropy

    net = Network()
    net.add("conv", Conv2D(1, 4, 3, padding=1, act="relu", dtype=np.float64), "image")
    net.add("pool", MaxPool2D(2), "conv")
    net.add("fc", FullyConnected(4 * 4 * 4, 3, dtype=np.float64), "pool")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    rng = np.random.default_rng(1)
    for p in net.parameters():  # the convolution's bias stays 0, as built
        p.value[...] = 0 if p.name == "conv.bias" else rng.standard_normal(p.shape) * 0.5
    image = Arg(_zero_background(rng), needs_grad=False)
    with pytest.raises(KinkHere, match=AT_THE_POINT):
        check_network_grad(net, {"image": image, "label": Arg(ids=[0, 2])}, inputs=True, elements=0)
