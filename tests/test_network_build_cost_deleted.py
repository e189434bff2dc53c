"""Network.add keeps its checks' indexes as layers are added; a layer deleted from
``net.layers`` (and ``net.wiring``) to replace it, as a fine-tune replaces a head, must not stay
in them: a deleted loss still filed as a reader made the next add raise KeyError, and the
deleted layer's parameter names refused its replacement as a name clash. The checks still
refuse what they refused before."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.layers import FullyConnected, Mixed, SoftmaxCrossEntropy
from distconv.layers.projection import FullMatrixProjection
from distconv.network import NetworkError


def _delete(net: Network, name: str) -> None:
    del net.layers[name], net.wiring[name]
    net.reset_firing_order()


def _head_net() -> Network:
    net = Network()
    net.add("body", FullyConnected(4, 4), "x")
    net.add("head", FullyConnected(4, 3), "body")
    net.add("loss", SoftmaxCrossEntropy(), ["head", "label"])
    return net


def _two_branches_run() -> tuple[Network, dict[str, Arg]]:
    """Layers ``a`` and ``b`` both reading ``x``, a loss reading ``a``, run forward once (so
    its order is cached); the network and its feeds."""
    net = Network()
    net.add("a", FullyConnected(4, 4), "x")
    net.add("b", FullyConnected(4, 4), "x")
    net.add("loss", SoftmaxCrossEntropy(), ["a", "label"])
    x = np.random.default_rng(0).standard_normal((2, 4))
    feeds = {"x": Arg(x, needs_grad=False), "label": Arg(ids=np.array([0, 1]))}
    net.forward(feeds)
    return net, feeds


def test_a_head_deleted_is_replaced_under_its_own_name():
    net = _head_net()
    _delete(net, "head")
    net.add("head", FullyConnected(4, 5), "body")
    assert net["head"].weight.name == "head.weight"
    assert [p.name for p in net.parameters()][-2:] == ["head.weight", "head.bias"]


def test_a_layer_a_deleted_loss_read_is_added_again():
    net = Network()
    net.add("loss", SoftmaxCrossEntropy(), ["head", "label"])
    _delete(net, "loss")
    net.add("head", FullyConnected(4, 3, act="softmax"), "x")  # no loss reads it now
    assert list(net.layers) == ["head"]


def test_after_a_deletion_the_checks_still_refuse():
    net = _head_net()
    net.add("m", Mixed([FullMatrixProjection(4, 4)]), "x")
    _delete(net, "head")
    with pytest.raises(NetworkError, match=r"^add\('head', \.\.\.\): SoftmaxCrossEntropy 'loss' "):
        net.add("head", FullyConnected(4, 3, act="softmax"), "body")
    with pytest.raises(NetworkError, match=r"its parameter 'm\.proj0\.weight' is named as a "):
        net.add("m.proj0", FullyConnected(4, 4, bias=False), "x")


def test_a_network_whose_loss_was_deleted_runs_forward_without_it():
    """The topological order was cached at the last add: a deleted loss, and no add after,
    left it in the order, and the next forward raised a bare KeyError."""
    net = _head_net()
    x = np.random.default_rng(0).standard_normal((2, 4))
    net.forward({"x": Arg(x, needs_grad=False), "label": Arg(ids=np.array([0, 1]))})
    _delete(net, "loss")
    out = net.forward({"x": Arg(x, needs_grad=False)})
    assert net.order() == ["body", "head"] and out["head"].value.shape == (2, 3)


def test_layers_rebound_to_a_dict_of_ones_own_are_what_the_next_add_checks():
    """A script filtering a head out rebinds ``net.layers`` and ``net.wiring``: the checks
    kept the old dicts, and refused the head added again as a name clash with itself."""
    net = _head_net()
    net.layers = {k: v for k, v in net.layers.items() if k not in ("head", "loss")}
    net.wiring = {k: v for k, v in net.wiring.items() if k not in ("head", "loss")}
    net.reset_firing_order()
    net.add("head", FullyConnected(4, 5, act="softmax"), "body")  # no loss reads it now
    with pytest.raises(NetworkError, match="applies its own softmax"):
        net.add("loss", SoftmaxCrossEntropy(), ["head", "label"])


def test_a_network_dropped_is_freed_at_once_not_at_the_cycle_collector_s_next_run():
    """The add checks held the network itself, to read its dicts as rebound: a reference cycle,
    so a dropped model (its weights, on a GPU its device memory) waited for a full collection,
    rare for an object that lived through a fit. Deleted, added again and run, it is freed."""
    net = _head_net()
    _delete(net, "head")
    net.add("head", FullyConnected(4, 3), "body")
    x = np.random.default_rng(0).standard_normal((2, 4))
    net.forward({"x": Arg(x, needs_grad=False), "label": Arg(ids=np.array([0, 1]))})
    net.backward(lambda p: None)
    dropped, weight = weakref.ref(net), weakref.ref(net["body"].weight)
    gc.disable()  # only reference counts free it: no collection in between
    try:
        del net
        assert dropped() is None and weight() is None
    finally:
        gc.enable()


def test_wiring_rebound_alone_is_what_the_next_add_checks():
    """A script rewiring its loss by rebinding ``net.wiring`` (its layers' dict kept): the
    checks kept the loss filed as a reader of what it read before, and let a softmax added
    under the name it reads now through, unrefused."""
    net = Network()
    net.add("body", FullyConnected(4, 4), "x")
    net.add("loss", SoftmaxCrossEntropy(), ["body", "label"])
    net.wiring = {**net.wiring, "loss": ("head", "label")}
    with pytest.raises(NetworkError, match=r"^add\('head', \.\.\.\): SoftmaxCrossEntropy 'loss' "):
        net.add("head", FullyConnected(4, 3, act="softmax"), "body")


def test_a_network_rewired_by_rebinding_its_wiring_runs_forward_in_the_new_order():
    """The order cached at the last add was kept while the layers' count stayed: ``a`` rewired
    to read ``b``, added after it, ran before it, and the forward raised a bare KeyError."""
    net, feeds = _two_branches_run()
    net.wiring = {**net.wiring, "a": ("b",)}
    net.forward(feeds)
    assert net.order() == ["b", "a", "loss"]


@pytest.mark.parametrize("change", ["renamed", "rewired", "list changed"])
def test_a_network_changed_in_place_runs_forward_in_the_new_order(change):
    """The order cached was kept while the dicts were the same objects and held as many
    layers: a layer renamed (``net.layers["h2"] = net.layers.pop("head")``) or rewired
    (``net.wiring["a"] = ("b",)``) in place ran the old order, and the forward raised a bare
    KeyError naming the old name or the new input. So did inputs given as a list and changed
    in place (``net.wiring["a"][0] = "b"``): the order's copy of the wiring held that list."""
    net, feeds = _two_branches_run()
    if change == "renamed":
        net.layers["a2"], net.wiring["a2"] = net.layers.pop("a"), net.wiring.pop("a")
        net.wiring["loss"] = ("a2", "label")
        expected = ["b", "a2", "loss"]
    elif change == "rewired":
        net.wiring["a"] = ("b",)
        expected = ["b", "a", "loss"]
    else:
        net.wiring["a"] = ["x"]
        net.forward(feeds)
        net.wiring["a"][0] = "b"
        expected = ["b", "a", "loss"]
    net.forward(feeds)
    assert net.order() == expected
