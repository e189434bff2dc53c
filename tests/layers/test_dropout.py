"""Dropout: its masks' statistics and scale, the identity outside training, its backward
against finite differences and PyTorch's, and masks that follow (seed, rank, step)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from distconv import Arg
from distconv.gradient_check import check_layer_grad, check_network_grad
from distconv.layers import Dropout
from distconv.layers.base import LayerError
from distconv.layers.inputs import grad_target
from distconv.layers.modes import forward_only
from distconv.layers.randomness import step_generator, training_step
from tests.layers.test_grad_check_own_layers import feeds, network


def _pass(layer: Dropout, x: np.ndarray, dz=None) -> tuple:
    """The output and the input's gradient (from ``dz``, ones by default) of one forward and
    backward, as the step and modes in force say."""
    arg = Arg(x, needs_grad=True)
    y = layer.forward(arg).value.copy()
    layer.output.grad = np.ones_like(y) if dz is None else dz
    layer.backward(lambda p: None)
    return y, arg.grad


def _trained(layer: Dropout, x: np.ndarray, key=(0, 0, 0), dz=None) -> tuple:
    """:func:`_pass` in a training step at ``key`` (seed, rank, step)."""
    with training_step(*key):
        return _pass(layer, x, dz)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_the_fraction_kept_is_binomial_and_the_kept_are_scaled_exactly(p, dtype):
    n = 40000
    x = np.random.default_rng(1).uniform(0.5, 2.0, (200, n // 200)).astype(dtype)
    layer = Dropout(p)
    y, dx = _trained(layer, x)
    kept = y != 0  # no x is 0
    # 5 standard deviations of Binomial(n, 1 - p): a wrong rate (p kept instead) is far out
    assert abs(int(kept.sum()) - n * (1 - p)) <= 5 * math.sqrt(n * p * (1 - p))
    scale = dtype(1 / (1 - p))
    assert y.dtype == dtype and set(np.unique(layer.mask)) == {0, scale}
    np.testing.assert_array_equal(y[kept], x[kept] * scale)
    np.testing.assert_array_equal(dx, np.where(kept, scale, dtype(0)))  # the same mask


def test_outside_training_at_p_0_and_in_forward_only_it_is_the_identity():
    x = np.random.default_rng(2).standard_normal((6, 5))
    dz = np.random.default_rng(3).standard_normal((6, 5))
    layers = [Dropout(0.5), Dropout(0.0), Dropout(0.5)]
    done = [_pass(layers[0], x, dz.copy())]  # a prediction: outside any step
    with training_step(0, 0, 0) as generator:
        before = generator.bit_generator.state
        done.append(_pass(layers[1], x, dz.copy()))
        with forward_only():  # an evaluation inside a step
            done.append(_pass(layers[2], x, dz.copy()))
        assert generator.bit_generator.state == before  # nothing drawn
    for layer, (y, dx) in zip(layers, done):
        np.testing.assert_array_equal(y, x)
        np.testing.assert_array_equal(dx, dz)
        assert layer.mask is None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_its_backward_agrees_with_finite_differences_and_a_wrong_one_fails(rng, dtype):
    x = Arg(rng.standard_normal((5, 8)).astype(dtype), needs_grad=True)
    assert check_layer_grad(Dropout(0.4), [x]).worst < (1e-6 if dtype == np.float64 else 2e-2)
    assert check_network_grad(network(Dropout(0.4)), feeds(rng), inputs=True).worst < 1e-6

    class Unscaled(Dropout):  # the mask without its 1 / (1 - p)
        def _backward(self, dz, callback):
            grad_target(self.inputs[0])[...] += dz * (self.mask != 0)

    with pytest.raises(AssertionError, match=r"gradient of input 0(\[.*\])? is off"):
        check_layer_grad(Unscaled(0.4), [x])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_it_agrees_with_pytorchs_dropout_given_the_same_mask(torch, dtype):
    """PyTorch's own dropout kernel given a mask (``native_dropout_backward``: the mask times
    the scale), its gradient by autograd."""
    rng = np.random.default_rng(4)
    x, dz = (rng.standard_normal((7, 9)).astype(dtype) for _ in range(2))
    layer = Dropout(0.3)
    y, dx = _trained(layer, x, key=(2, 1, 5), dz=dz.copy())
    xt = torch.from_numpy(x.copy()).requires_grad_(True)
    keep = torch.from_numpy(layer.mask != 0)
    yt = torch.ops.aten.native_dropout_backward(xt, keep, 1 / (1 - 0.3))
    yt.backward(torch.from_numpy(dz))
    rtol = 1e-15 if dtype == np.float64 else 1e-6
    np.testing.assert_allclose(y, yt.detach().numpy(), rtol=rtol)
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=rtol)


def test_the_same_seed_rank_and_step_give_the_same_mask_and_others_another():
    x = np.ones((16, 16))
    mask = _trained(Dropout(0.5), x, key=(7, 0, 3))[0]
    np.testing.assert_array_equal(_trained(Dropout(0.5), x, key=(7, 0, 3))[0], mask)
    for key in ((7, 1, 3), (7, 0, 4), (8, 0, 3)):  # another rank, step, seed
        assert (_trained(Dropout(0.5), x, key=key)[0] != mask).mean() > 0.3, key


def test_two_dropouts_of_a_step_draw_in_turn_from_its_generator():
    x = np.ones((8, 8))
    first, second = Dropout(0.5), Dropout(0.5)
    with training_step(0, 0, 0):
        a = first.forward(Arg(x)).value
        b = second.forward(Arg(x)).value
    with training_step(0, 0, 0):
        step_generator().random(x.shape, np.float32)  # what the first drew
        np.testing.assert_array_equal(
            b, (step_generator().random(x.shape, np.float32) >= 0.5) * 2.0
        )
    assert (a != b).any()


def test_its_settings_record_p_and_a_p_out_of_range_is_refused():
    assert Dropout(0.25).settings() == {"act": "Linear", "p": 0.25}
    for p in (1, 1.5, -0.1, float("nan"), True, "0.5", None):
        with pytest.raises(LayerError, match=r"p=.* must be a number in \[0, 1\)"):
            Dropout(p)


@pytest.mark.gpu  # benchmarks/gpu.py runs pytest -m gpu on a device: unmarked, it ran nowhere
def test_on_a_gpu_the_mask_is_the_one_a_cpu_draws(cupy):
    x = np.random.default_rng(5).standard_normal((32, 32)).astype(np.float32)
    on_host = _trained(Dropout(0.5), x, key=(1, 0, 2))[0]
    layer = Dropout(0.5)
    with training_step(1, 0, 2):
        y = layer.forward(Arg(cupy.asarray(x))).value
    assert isinstance(y, cupy.ndarray) and isinstance(layer.mask, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(y), on_host)
