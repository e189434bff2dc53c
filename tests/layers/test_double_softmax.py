"""Paddle's idiom ``fc(act="softmax")`` + ``classification_cost`` is refused under a
``SoftmaxCrossEntropy``, which takes logits: it trained on a softmax of a softmax without a
word (a loss stalled near 0.59 where the logits reach 0.08, at the same accuracy)."""

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.layers import (
    Activation,
    FullyConnected,
    MSELoss,
    SelectiveFullyConnected,
    SoftmaxCrossEntropy,
)
from distconv.network import NetworkError

FIX = (
    "drop the activation: SoftmaxCrossEntropy applies its own softmax; Paddle's "
    "classification_cost takes probabilities, this loss takes logits"
)


def _said(loss: str, logits: str) -> str:
    return (
        f"{loss} reads the output of {logits}, whose act is 'softmax': a softmax of a "
        f"softmax, which trains badly without an error; {FIX}"
    )


def test_an_fc_with_a_softmax_under_the_loss_is_refused_naming_both_and_the_fix():
    net = Network()
    net.add("fc", FullyConnected(10, 3, act="softmax"), "x")
    with pytest.raises(NetworkError) as refused:
        net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    want = "add('loss', ...): " + _said("SoftmaxCrossEntropy 'loss'", "FullyConnected 'fc'")
    assert str(refused.value) == want
    assert list(net.layers) == ["fc"]  # nothing of the refused add is left


def test_the_loss_added_first_refuses_the_softmax_added_after():
    """A network built from its loss down meets the mistake at the softmax's add."""
    net = Network()
    net.add("loss", SoftmaxCrossEntropy(), ["top", "label"])
    with pytest.raises(NetworkError) as refused:
        net.add("top", Activation("softmax"), "x")
    assert str(refused.value) == "add('top', ...): " + _said(
        "SoftmaxCrossEntropy 'loss'", "Activation 'top'"
    )
    assert list(net.layers) == ["loss"]


def test_a_selective_fc_with_a_softmax_under_the_loss_is_refused():
    net = Network()
    net.add("sel", SelectiveFullyConnected(4, 6, act="softmax"), ["x", "cols"])
    with pytest.raises(NetworkError, match="SelectiveFullyConnected 'sel', whose act is"):
        net.add("loss", SoftmaxCrossEntropy(), ["sel", "label"])


def test_a_softmax_elsewhere_is_accepted_and_trains_as_before(rng):
    """A softmax that is no loss's logits: a hidden layer's, one under an MSE loss, and logits
    with no activation under the cross-entropy."""
    net = Network()
    net.add("hidden", FullyConnected(4, 5, act="softmax", dtype=np.float64), "x")
    net.add("logits", FullyConnected(5, 3, dtype=np.float64), "hidden")
    net.add("loss", SoftmaxCrossEntropy(), ["logits", "label"])
    net.add("probs", Activation("softmax"), "logits")
    net.add("mse", MSELoss(), ["probs", "target"])
    out = net.forward(
        {
            "x": Arg(rng.standard_normal((2, 4)), needs_grad=False),
            "label": Arg(ids=np.array([0, 2])),
            "target": Arg(np.eye(3)[[0, 2]], needs_grad=False),
        }
    )
    assert np.isfinite(out["loss"].value) and np.isfinite(out["mse"].value)
