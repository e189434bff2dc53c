"""Adding a layer to a Network costs about the same however many layers it holds: each add
counted every layer's parameters, checked the new names against every parameter and walked
down from every loss, so 4000 layers took 24 s to build. Counted here in reads of what each
add looked at, not in seconds, so that a busy machine cannot fail it; the refusals those
checks make are kept word for word (tests/test_network.py, tests/layers/test_double_softmax.py)."""

import pytest

from distconv import Network
from distconv.layers import FullyConnected, Mixed, SoftmaxCrossEntropy
from distconv.layers.projection import FullMatrixProjection
from distconv.network import NetworkError

LAYERS = 60


class _CountedFC(FullyConnected):
    """A FullyConnected that counts how often its parameters are asked for."""

    asked = 0

    def parameters(self):
        self.asked += 1
        return super().parameters()


class _CountedLoss(SoftmaxCrossEntropy):
    """A softmax cross-entropy that counts how often the double-softmax check looks at it."""

    looked_at = 0

    @property
    def takes_logits(self) -> bool:
        self.looked_at += 1
        return True


def _chain(layers: int) -> list[_CountedFC]:
    net = Network()
    fcs = [_CountedFC(4, 4) for _ in range(layers)]
    for i, fc in enumerate(fcs):
        net.add(f"fc{i}", fc, "x" if i == 0 else f"fc{i - 1}")
    return fcs


def test_an_add_asks_no_other_layer_for_its_parameters():
    """The first layer of a chain is asked as often as in a chain of two: never again once
    added (the users of each parameter, and the names taken, are kept as layers are added)."""
    short, long = _chain(2), _chain(LAYERS)
    assert long[0].asked == short[0].asked <= 3


def test_an_add_looks_only_at_the_losses_above_the_new_layer():
    """A head per class: each loss is looked at when it is added, not at every later add."""
    net = Network()
    losses = [_CountedLoss() for _ in range(LAYERS)]
    for i, loss in enumerate(losses):
        net.add(f"fc{i}", FullyConnected(4, 3), "x")
        net.add(f"loss{i}", loss, [f"fc{i}", "label"])
    assert max(loss.looked_at for loss in losses) <= 2


def test_of_two_losses_above_a_softmax_added_last_the_first_added_is_named():
    """Built from the losses down, the softmax completes two chains at once: the refusal names
    the loss added first, as when every loss was walked down from in the order added."""
    net = Network()
    net.add("second", SoftmaxCrossEntropy(), ["top", "label"])
    net.add("first", SoftmaxCrossEntropy(), ["top", "label"])
    with pytest.raises(NetworkError, match=r"^add\('top', \.\.\.\): SoftmaxCrossEntropy 'second' "):
        net.add("top", FullyConnected(4, 3, act="softmax"), "x")
    assert list(net.layers) == ["second", "first"]


def test_a_weight_renamed_by_its_owners_add_is_known_by_its_new_name():
    """A weight shared before its owner was added is renamed by the owner's add: a layer whose
    parameter takes the new name is refused, and one that takes the old name is not."""
    owner = Mixed([FullMatrixProjection(4, 4)])
    net = Network()
    net.add("reader", FullyConnected(4, 4, bias=False, weight=owner.parameters()[0]), "x")
    old_name = owner.parameters()[0].name
    net.add("m", owner, "x")
    with pytest.raises(NetworkError, match=r"its parameter 'm\.proj0\.weight' is named as a "):
        net.add("m.proj0", FullyConnected(4, 4, bias=False), "x")
    layer_of_the_old_name = old_name.removesuffix(".weight")  # its FC's weight: the old name
    net.add(layer_of_the_old_name, FullyConnected(4, 4, bias=False), "x")
    assert net[layer_of_the_old_name].weight.name == old_name != owner.parameters()[0].name
