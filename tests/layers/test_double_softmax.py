"""Paddle's idiom ``fc(act="softmax")`` + ``classification_cost`` is refused under a
``SoftmaxCrossEntropy``, which takes logits: it trained on a softmax of a softmax without a
word (a loss stalled near 0.59 where the logits reach 0.08, at the same accuracy)."""

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.layers import (
    Activation,
    Concatenate,
    Dropout,
    FullyConnected,
    IdentityProjection,
    Mixed,
    MSELoss,
    Reshape,
    SelectiveFullyConnected,
    SoftmaxCrossEntropy,
)
from distconv.network import NetworkError

FIX = (
    "drop the activation: SoftmaxCrossEntropy applies its own softmax; Paddle's "
    "classification_cost takes probabilities, this loss takes logits (a run checkpointed "
    "with it goes on as a new run from its weights: --init-from)"
)


def _said(loss: str, logits: str, through: str = "") -> str:
    return (
        f"{loss} reads the output of {logits}, whose act is 'softmax'{through}: a softmax of "
        f"a softmax, which trains badly without an error; {FIX}"
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


#: layers that pass a softmax on to the loss unchanged in meaning, each reading "sm"
PASSING_ON = [
    lambda: Dropout(0.1),
    lambda: Reshape(3),
    lambda: Activation("linear"),
    lambda: Mixed([IdentityProjection(3)]),
]


@pytest.mark.parametrize("between", PASSING_ON)
@pytest.mark.parametrize("loss_first", [False, True], ids=["softmax first", "loss first"])
def test_a_softmax_passed_on_to_the_loss_is_refused_in_either_order(between, loss_first):
    """A dropout, reshape, identity or identity projection between changes nothing: the loss
    still reads probabilities. The add that completes the chain is refused, whichever it is."""
    adds = [
        ("sm", FullyConnected(4, 3, act="softmax"), "x"),
        ("mid", between(), "sm"),
        ("loss", SoftmaxCrossEntropy(), ["mid", "label"]),
    ]
    if loss_first:
        adds.reverse()
    net = Network()
    for add in adds[:-1]:
        net.add(*add)
    last = adds[-1][0]
    with pytest.raises(NetworkError) as refused:
        net.add(*adds[-1])
    mid = net.layers["mid"].label
    want = _said("SoftmaxCrossEntropy 'loss'", "FullyConnected 'sm'", f", through {mid}")
    assert str(refused.value) == f"add({last!r}, ...): {want}"
    assert last not in net.layers


def test_a_softmax_concatenated_into_the_logits_is_refused_when_added_last():
    net = Network()
    net.add("loss", SoftmaxCrossEntropy(), ["cat", "label"])
    net.add("cat", Concatenate(), ["logits", "sm"])
    net.add("logits", FullyConnected(4, 3), "x")
    with pytest.raises(NetworkError, match=r"^add\('sm', \.\.\.\): .*, through Concatenate 'cat'"):
        net.add("sm", Activation("softmax"), "logits")


def test_a_layer_that_changes_values_between_is_no_double_softmax():
    """A softmax, then an FC or a relu, then the loss: what reaches the loss is no longer the
    softmax's probabilities, and is accepted."""
    net = Network()
    net.add("sm", FullyConnected(4, 3, act="softmax"), "x")
    net.add("fc", FullyConnected(3, 3), "sm")
    net.add("drop", Dropout(0.1), "fc")
    net.add("loss", SoftmaxCrossEntropy(), ["drop", "label"])
    net.add("r", Activation("relu"), "sm")
    net.add("loss2", SoftmaxCrossEntropy(), ["r", "label"])
    assert list(net.layers)[-1] == "loss2"


class ProbabilityCrossEntropy(SoftmaxCrossEntropy):
    """A loss of one's own that reads probabilities: ``-log p[label]``."""

    takes_logits = False

    def _forward(self, probs, label):
        self.prob, self._ids = probs.value, label.ids
        picked = self.prob[np.arange(len(self._ids)), self._ids]
        return -np.log(picked).mean()


def test_a_cross_entropy_of_ones_own_that_reads_probabilities_may_have_a_softmax_under_it(rng):
    net = Network()
    net.add("fc", FullyConnected(4, 3, act="softmax", dtype=np.float64), "x")
    net.add("loss", ProbabilityCrossEntropy(), ["fc", "label"])
    out = net.forward({"x": rng.standard_normal((2, 4)), "label": Arg(ids=np.array([0, 2]))})
    assert np.isfinite(out["loss"].value)
