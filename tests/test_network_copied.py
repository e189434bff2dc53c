"""A network deep-copied or pickled (a model kept as it was before fine-tuning, one sent to
another process) refuses what the original refuses: the add checks knew the original's layers
by their ids, so the copy's own layer added again under another name was let through, and ran
twice in a pass, its gradient computed from one call's inputs, with no error."""

from __future__ import annotations

import copy
import pickle

import pytest

from distconv import Network
from distconv.layers import FullyConnected, SoftmaxCrossEntropy
from distconv.network import NetworkError

COPIES = {"deepcopy": copy.deepcopy, "pickle": lambda net: pickle.loads(pickle.dumps(net))}


@pytest.mark.parametrize("copied", COPIES.values(), ids=COPIES.keys())
def test_a_copy_refuses_its_own_layer_added_again(copied):
    net = Network()
    net.add("body", FullyConnected(4, 4), "x")
    net.add("loss", SoftmaxCrossEntropy(), ["body", "label"])
    copy_ = copied(net)
    with pytest.raises(NetworkError, match=r"^add\('again', \.\.\.\): this FullyConnected object "):
        copy_.add("again", copy_["body"], "x")
    copy_.add("other", FullyConnected(4, 4), "x")  # a layer of its own is added as before
    assert list(copy_.layers) == ["body", "loss", "other"] and list(net.layers) == ["body", "loss"]
