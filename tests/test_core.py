"""Parameter, Arg, Network, the gradient checker itself, and the backend."""

import numpy as np
import pytest

from distconv import Arg, Parameter
from distconv.backend import BackendError, get_array_module, set_device, to_host
from distconv.gradient_check import check_layer_grad
from distconv.layers import Conv2D, FullyConnected, MSELoss, SoftmaxCrossEntropy
from distconv.layers.base import Layer, LayerError
from distconv.layers.inputs import grad_target
from distconv.network import Network, NetworkError


def test_parameter_shared_by_k_users_fires_once_after_all():
    p = Parameter("w", np.zeros(3))
    p.shared_count = 2  # what a Network counts before each backward
    fired = []
    p.inc_update(fired.append)
    assert fired == []
    p.inc_update(fired.append)
    assert fired == [p]
    p.inc_update(fired.append)  # the counter reset: a new pass starts
    assert fired == [p]


def test_static_parameter_never_fires_and_has_no_grad():
    p = Parameter("w", np.zeros(3), static=True)
    fired = []
    p.inc_update(fired.append)
    assert fired == [] and p.grad is None
    p.set_static(False)
    p.inc_update(fired.append)
    assert fired == [p] and p.grad is not None


def test_arg_grad_is_zeros_on_first_use():
    a = Arg(np.ones((2, 3)))
    assert not a.has_grad
    assert np.array_equal(a.grad, np.zeros((2, 3)))
    a.grad += 1
    assert a.has_grad and a.grad.sum() == 6


def test_a_gradient_set_by_hand_of_another_shape_is_refused_where_it_is_set(rng):
    fc = FullyConnected(4, 3, dtype=np.float64)
    out = fc.forward(Arg(rng.standard_normal((2, 4))))
    with pytest.raises(ValueError, match=r"its value's shape \(2, 3\); got shape \(3, 2\)"):
        out.grad = np.ones((3, 2))  # before: numpy's "could not be broadcast" in backward
    with pytest.raises(ValueError, match=r"got float"):
        out.grad = 1.0
    assert not out.has_grad  # nothing half-set
    out.grad = np.ones((2, 3))  # the right shape is taken as it is
    fired = []
    fc.backward(fired.append)
    assert np.allclose(fc.weight.grad, np.ones((2, 3)).T @ fc.inputs[0].value)
    assert len(fired) == 2


def test_a_number_is_taken_as_the_gradient_of_a_0d_loss(rng):
    """``loss.grad = 1.0`` seeded a scalar loss's backward before the shape check came, and
    must still; a number stays refused for a value with a shape, and so does a bool."""
    loss = MSELoss()
    pred = Arg(rng.standard_normal((2, 3)))
    out = loss.forward(pred, Arg(np.zeros((2, 3)), needs_grad=False))
    assert out.shape == ()
    with pytest.raises(ValueError, match=r"got bool"):
        out.grad = True
    out.grad = 2.0
    loss.backward(lambda p: None)
    assert np.allclose(pred.grad, 2.0 * 2 * pred.value / pred.value.size)
    with pytest.raises(ValueError, match=r"got int"):
        pred.grad = 1


def _shared_net(rng):
    """Two FC layers sharing one weight, feeding a sum and a loss."""
    net = Network()
    first = net.add("fc1", FullyConnected(4, 4, act="tanh", dtype=np.float64), inputs="x")
    net.add("fc2", FullyConnected(4, 4, weight=first.weight, dtype=np.float64), inputs="fc1")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["fc2", "label"])
    feeds = {
        "x": Arg(rng.standard_normal((3, 4)), needs_grad=False),
        "label": Arg(ids=np.array([0, 1, 3])),
    }
    return net, first, feeds


def test_parameter_shared_by_two_layers_fires_once_per_pass(rng):
    net, first, feeds = _shared_net(rng)
    assert first.weight.shared_count == 2
    fired = []
    net.forward(feeds)
    net.backward(lambda p: fired.append(p.name))
    assert fired.count("fc1.weight") == 1
    assert sorted(fired) == ["fc1.bias", "fc1.weight", "fc2.bias"]


def test_network_backward_twice_doubles_parameter_grads(rng):
    net, first, feeds = _shared_net(rng)
    net.forward(feeds)
    net.backward(lambda p: None)
    once = {p.name: p.grad.copy() for p in net.parameters()}
    net.backward(lambda p: None)
    for p in net.parameters():
        np.testing.assert_allclose(p.grad, 2 * once[p.name], rtol=1e-12)


def test_shared_weight_gradient_matches_finite_differences(rng):
    net, first, feeds = _shared_net(rng)
    w = first.weight

    def loss():
        return float(net.forward(feeds)["loss"].value)

    net.forward(feeds)
    net.backward(lambda p: None)
    num = np.zeros_like(w.value)
    for i in np.ndindex(w.value.shape):
        old = w.value[i]
        w.value[i] = old + 1e-6
        up = loss()
        w.value[i] = old - 1e-6
        down = loss()
        w.value[i] = old
        num[i] = (up - down) / 2e-6
    np.testing.assert_allclose(w.grad, num, rtol=1e-6, atol=1e-9)


def test_network_dag_with_two_inputs_and_topological_order(rng):
    net = Network()
    # added out of order: the loss first
    net.add("loss", SoftmaxCrossEntropy(), inputs=["fc", "label"])
    net.add("fc", FullyConnected(6, 3, dtype=np.float64), inputs="conv")
    net.add("conv", Conv2D(1, 6, 2, dtype=np.float64), inputs="image")
    assert net.order() == ["conv", "fc", "loss"]
    assert net.feed_names == ["image", "label"]
    out = net.forward(
        {"image": rng.standard_normal((2, 1, 2, 2)), "label": Arg(ids=np.array([1, 2]))}
    )
    assert out["fc"].shape == (2, 3) and out["loss"].shape == ()


def test_network_errors(rng):
    net = Network()
    net.add("a", FullyConnected(2, 2), inputs="b")
    net.add("b", FullyConnected(2, 2), inputs="a")
    with pytest.raises(NetworkError, match="cycle through layers"):
        net.order()
    with pytest.raises(NetworkError, match="used twice"):
        net.add("a", FullyConnected(2, 2), inputs="x")

    net = Network()
    net.add("fc", FullyConnected(2, 2), inputs="x")
    with pytest.raises(NetworkError, match="input 'x' was not fed"):
        net.forward({})
    bad = np.ones((2, 2), np.float32)
    bad[1, 0] = np.nan
    with pytest.raises(NetworkError, match=r"input 'x' of shape \(2, 2\) holds 1 NaN"):
        net.forward({"x": bad})


class _WrongGrad(Layer):
    """y = x * w with a backward that is off by 10%: the checker must catch it."""

    def __init__(self):
        super().__init__()
        self.w = self.new_param("w", np.linspace(0.5, 1.5, 4))

    def _forward(self, x):
        return x.value * self.w.value

    def _backward(self, dz, callback):
        grad_target(self.inputs[0])[...] += dz * self.w.value
        self.w.grad += 1.1 * (dz * self.inputs[0].value).sum(axis=0)
        self.w.inc_update(callback)


def test_gradient_checker_catches_a_wrong_gradient(rng):
    with pytest.raises(AssertionError, match=r"gradient of param _WrongGrad.w.* is off"):
        check_layer_grad(_WrongGrad(), [Arg(rng.standard_normal((3, 4)))])


class _Overwrites(_WrongGrad):
    """Assigns (=) instead of adding: backward twice would not double."""

    def _backward(self, dz, callback):
        self.inputs[0].grad = dz * self.w.value
        self.w.grad[...] = (dz * self.inputs[0].value).sum(axis=0)
        self.w.inc_update(callback)


def test_gradient_checker_catches_overwritten_gradients(rng):
    with pytest.raises(AssertionError, match="did not double"):
        check_layer_grad(_Overwrites(), [Arg(rng.standard_normal((3, 4)))])


class _ReadsAfterFiring(_WrongGrad):
    """Computes the input gradient from the weight after ``inc_update``: under LocalSync, whose
    callback applies the optimizer, that is the updated weight."""

    def _backward(self, dz, callback):
        if not self.w.static:
            self.w.grad += (dz * self.inputs[0].value).sum(axis=0)
        self.w.inc_update(callback)
        grad_target(self.inputs[0])[...] += dz * self.w.value


def test_gradient_checker_catches_a_weight_read_after_its_callback(rng):
    with pytest.raises(AssertionError, match=r"computed from a parameter after its callback fired"):
        check_layer_grad(_ReadsAfterFiring(), [Arg(rng.standard_normal((3, 4)))])


def test_gpu_without_cupy_is_a_clear_error():
    try:
        import cupy  # noqa: F401

        pytest.skip("cupy is installed here")
    except ImportError:
        pass
    with pytest.raises(BackendError, match="needs cupy.*pip install 'distconv\\[gpu\\]'"):
        set_device("gpu")
    with pytest.raises(BackendError, match="device must be one of"):
        set_device("tpu")
    assert get_array_module(np.zeros(1)) is np
    assert isinstance(to_host([1, 2]), np.ndarray)


def test_cupy_arrays_are_recognised_by_type_even_before_set_device():
    try:
        import cupy  # noqa: F401

        pytest.skip("cupy is installed here; the GPU tests cover it")
    except ImportError:
        pass
    fake = type("ndarray", (), {"__module__": "cupy._core.core"})()
    with pytest.raises(BackendError, match="needs cupy"):
        get_array_module(np.zeros(1), fake)


def test_network_counts_only_its_own_users_of_a_shared_parameter(rng):
    net = Network()
    fc = net.add("fc", FullyConnected(4, 3, dtype=np.float64), inputs="x")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["fc", "label"])
    FullyConnected(4, 3, weight=fc.weight)  # built with the weight, never added to the network
    assert fc.weight.shared_count == 1  # the network counts; building a layer does not
    feeds = {"x": rng.standard_normal((2, 4)), "label": Arg(ids=np.array([0, 2]))}
    fired: list[str] = []
    for n_pass in (1, 2):
        net.forward(feeds)
        net.backward(lambda p: fired.append(p.name))
        assert sorted(fired) == sorted(["fc.bias", "fc.weight"] * n_pass)


def test_a_failed_forward_leaves_nothing_to_backward():
    fc = FullyConnected(4, 2)
    fc(Arg(np.zeros((3, 4), np.float32)))
    with pytest.raises(LayerError):
        fc(Arg(np.zeros((5, 7), np.float32)))
    with pytest.raises(LayerError, match="backward called before forward"):
        fc.backward(lambda p: None)


@pytest.mark.parametrize("callback", [None, "sgd"])
def test_a_layer_run_by_hand_refuses_a_callback_that_is_not_a_function(callback):
    """Layers run by hand (as the README shows) took backward(None), added the bias's
    gradient and failed at its inc_update with "'NoneType' object is not callable", naming
    neither the layer nor the callback: a corrected second try added that gradient twice.
    """
    fc = FullyConnected(4, 3, name="f")
    out = fc(Arg(np.ones((2, 4), np.float32), needs_grad=False))
    out.grad = np.ones_like(out.value)
    said = r"^FullyConnected 'f': backward\(callback\): the callback must be a function"
    with pytest.raises(LayerError, match=said):
        fc.backward(callback)
    assert all(not p.grad.any() for p in fc.parameters())


def test_the_finite_check_can_be_turned_off():
    net = Network(check_finite=False)
    net.add("fc", FullyConnected(2, 2), inputs="x")
    bad = np.full((1, 2), np.nan, np.float32)
    assert np.isnan(net.forward({"x": bad})["fc"].value).all()
