"""A per-token softmax pooled over each sequence into a ``SoftmaxCrossEntropy`` is refused as
the double softmax it is: Paddle's idiom (per-token ``fc(act="softmax")``, a pooling, then
``classification_cost``, which takes probabilities) ported here makes the loss read pooled
probabilities as logits. The refusal walked through a dropout, a reshape, a concatenation, and
stopped at the pool, so this one trained badly without a word."""

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.layers import (
    Dropout,
    FullyConnected,
    MSELoss,
    SequencePool,
    SoftmaxCrossEntropy,
)
from distconv.layers.sequence_pool import MODES
from distconv.network import NetworkError
from distconv.network_checks import DROP_THE_SOFTMAX


def _refusal(added: str, through: str) -> str:
    return (
        f"add({added!r}, ...): SoftmaxCrossEntropy 'loss' reads the output of FullyConnected "
        f"'tokens', whose act is 'softmax', through {through}: a softmax of a softmax, which "
        f"trains badly without an error; {DROP_THE_SOFTMAX}"
    )


@pytest.mark.parametrize("mode", MODES)
def test_a_pooled_softmax_under_the_loss_is_refused_for_every_mode(mode):
    net = Network()
    net.add("tokens", FullyConnected(4, 3, act="softmax"), "words")
    net.add("pool", SequencePool(mode), "tokens")
    with pytest.raises(NetworkError) as refused:
        net.add("loss", SoftmaxCrossEntropy(), ["pool", "label"])
    assert str(refused.value) == _refusal("loss", "SequencePool 'pool'")
    assert list(net.layers) == ["tokens", "pool"]  # nothing of the refused add is left


def test_the_pool_added_last_between_a_dropout_and_the_loss_is_refused():
    """Any order of adds: the pool that completes the chain is the one refused."""
    net = Network()
    net.add("loss", SoftmaxCrossEntropy(), ["drop", "label"])
    net.add("tokens", FullyConnected(4, 3, act="softmax"), "words")
    net.add("drop", Dropout(0.5), "pool")
    with pytest.raises(NetworkError) as refused:
        net.add("pool", SequencePool("average"), "tokens")
    assert str(refused.value) == _refusal("pool", "SequencePool 'pool', Dropout 'drop'")


def test_pooled_logits_and_pooled_probabilities_under_another_loss_train(rng):
    """Per-token logits pooled into the cross-entropy, and pooled probabilities compared by an
    MSE, are no double softmax."""
    net = Network()
    net.add("logits", FullyConnected(4, 3, dtype=np.float64), "words")
    net.add("pool", SequencePool("average"), "logits")
    net.add("loss", SoftmaxCrossEntropy(), ["pool", "label"])
    net.add("probs", FullyConnected(4, 3, act="softmax", dtype=np.float64), "words")
    net.add("mean_probs", SequencePool("average"), "probs")
    net.add("mse", MSELoss(), ["mean_probs", "target"])
    words = Arg(rng.standard_normal((5, 4)), needs_grad=False, seq_starts=np.array([0, 2, 5]))
    out = net.forward(
        {
            "words": words,
            "label": Arg(ids=np.array([0, 2])),
            "target": Arg(np.eye(3)[[0, 2]], needs_grad=False),
        }
    )
    assert np.isfinite(float(out["loss"].value.sum()) + float(out["mse"].value.sum()))
