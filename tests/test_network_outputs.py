"""``Network.forward(feeds, outputs=...)`` runs only the layers the outputs need. A backward
after such a pass is refused, naming that pass as the cause (the layers it skipped still hold
an earlier pass's inputs), and a forward of every layer afterwards trains as if the partial
pass never ran."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Arg
from distconv.init import set_seed
from distconv.models import lenet
from distconv.network import Network, NetworkError

RNG = np.random.default_rng(0)
X = RNG.random((4, 1, 8, 8)).astype(np.float32)
OTHER = RNG.random((4, 1, 8, 8)).astype(np.float32)
Y = np.array([1, 2, 3, 4])


def _net() -> Network:
    set_seed(0)
    return lenet((1, 8, 8), 10)


def _gradients(net: Network) -> dict[str, np.ndarray]:
    """Each parameter's gradient after a forward of every layer on X and a backward."""
    net.zero_grad()
    net.forward({"image": X, "label": Arg(ids=Y)})
    net.backward(lambda p: None, loss_scale=len(X))
    return {p.name: p.grad.copy() for p in net.parameters()}


def test_a_backward_after_a_forward_with_outputs_is_refused_naming_that_pass():
    net = _net()
    net.forward({"image": X, "label": Arg(ids=Y)})  # every layer: the loss holds X's labels
    net.forward({"image": OTHER}, outputs=["fc2"])  # the loss did not run on OTHER
    with pytest.raises(NetworkError) as caught:
        net.backward(lambda p: None, loss_scale=len(X))
    said = str(caught.value)
    assert "ran only the layers its outputs=... need: layer(s) ['loss'] did not run" in said
    assert "run forward without outputs first" in said and "added after" not in said


def test_a_forward_of_every_layer_after_one_with_outputs_trains_as_before():
    expected = _gradients(_net())
    net = _net()
    net.forward({"image": OTHER}, outputs=["fc2"])
    got = _gradients(net)
    for name, grad in expected.items():
        np.testing.assert_array_equal(got[name], grad, err_msg=name)


def test_one_output_may_be_named_by_a_string():
    net = _net()
    out = net.forward({"image": X}, outputs="fc2")
    assert set(out) == {"image", "conv1", "pool1", "conv2", "pool2", "fc1", "fc2"}
    assert set(net.forward({"image": X}, outputs="image")) == {"image"}


def test_outputs_may_be_any_iterable_of_names():
    """A generator is read once: a feed it names was dropped from the outputs returned, as the
    layers needed had read it up."""
    net = _net()
    assert set(net.forward({"image": X}, outputs=(name for name in ["image"]))) == {"image"}
