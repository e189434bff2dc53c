"""Reshape reads values, not ids: integer feeds arrive as ids (a token window for a table), and
the refusal told the user to cast them to floats, which no reader of ids then takes. It names
the ids and the way out: the shape their reader takes, given in the data set."""

import numpy as np
import pytest

from distconv import Arg, Network, Trainer
from distconv.layers import (
    FullyConnected,
    LayerError,
    Mixed,
    Reshape,
    SoftmaxCrossEntropy,
    TableProjection,
)
from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync

pytestmark = pytest.mark.timeout(60)

SAID = (
    "Reshape 'r': reshapes values, not ids (got int64 ids): give the feed the shape the layer "
    "that reads its ids takes in the data set itself"
)


def test_ids_are_refused_naming_them_and_the_data_set_as_the_place_to_shape_them():
    with pytest.raises(LayerError) as refused:
        Reshape(6, name="r")(Arg(ids=np.zeros((4, 3, 2), np.int64)))
    assert str(refused.value) == SAID


def test_a_fit_of_an_integer_feed_through_reshape_is_refused_alike():
    """The Trainer feeds integer arrays as ids: the refusal of a real fit's first forward."""
    net = Network()
    net.add("r", Reshape(6), "tok")
    net.add("emb", Mixed([TableProjection(10, 4)]), "r")
    net.add("fc", FullyConnected(4, 2), "emb")
    net.add("loss", SoftmaxCrossEntropy(), ["fc", "label"])
    data = {"tok": np.zeros((4, 3, 2), np.int64), "label": np.zeros(4, np.int64)}
    trainer = Trainer(net, LocalSync(create_optimizer("sgd")), 2, progress=False)
    with pytest.raises(LayerError) as refused:
        trainer.fit(data, epochs=1)
    assert SAID in str(refused.value) and trainer.history == []
