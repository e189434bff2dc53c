"""What ``SelectiveFullyConnected`` says of a selection out of place or of the wrong type: a
selection given first was told to be cast to a float type, and a float selection fed through
``fit`` (where no Arg is built by hand) was told of ``Arg.ids``, not of its dtype."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Network, Trainer
from distconv.arg import Arg
from distconv.layers import FullyConnected, LayerError, SelectiveFullyConnected, SoftmaxCrossEntropy
from distconv.optim import SGD
from distconv.sync.local import LocalSync

pytestmark = pytest.mark.timeout(60)

ROWS = 16


def _selection() -> np.ndarray:
    """A selection: each row's 2 columns of the layer's 10, as integer ids."""
    return np.random.default_rng(1).integers(0, 10, (ROWS, 2))


def _data(cols: np.ndarray) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((ROWS, 3)).astype(np.float32)
    return {"x": x, "cols": cols, "label": rng.integers(0, 2, ROWS)}


def _fit(inputs: list[str], data: dict[str, np.ndarray]) -> None:
    net = Network()
    net.add("sfc", SelectiveFullyConnected(3, 10), inputs)
    net.add("loss", SoftmaxCrossEntropy(), ["sfc", "label"])
    Trainer(net, LocalSync(SGD(lr=0.1)), batch_size=4, progress=False).fit(data, epochs=1)


def test_a_selection_given_first_is_told_it_goes_last():
    cols = _selection()
    said = (
        r"^SelectiveFullyConnected 'sfc': expected 3 features per sample, got integer ids: the "
        r"selection is the last input \(inputs are \[data\.\.\., selection\]\)$"
    )
    with pytest.raises(LayerError, match=said):
        _fit(["cols", "x"], _data(cols))


def test_integer_data_in_its_place_is_still_told_to_cast_it():
    """Integer features of the data input's width (counts, pixels) are data, not a selection
    out of place: told to move the selection, they led away from the cast they need."""
    data = _data(_selection())
    data["x"] = np.random.default_rng(2).integers(0, 5, (ROWS, 3))
    said = r"got integer ids \(an integer array is fed as ids: cast it to a float type\)$"
    with pytest.raises(LayerError, match=said):
        _fit(["x", "cols"], data)


def test_a_float_selection_through_fit_is_told_its_dtype():
    cols = _selection().astype(np.float32)
    said = (
        r"^SelectiveFullyConnected 'sfc': the selection \(last input\) must be integer column "
        r"indices, got float32 values: feed an integer array, or Arg\(ids=cols\)$"
    )
    with pytest.raises(LayerError, match=said):
        _fit(["x", "cols"], _data(cols))


def test_a_plain_fully_connected_layer_fed_ids_is_still_told_to_cast_them():
    """Only the selective layer has an input of ids where integer ids belong."""
    layer = FullyConnected(3, 4, name="fc")
    said = r"got integer ids \(an integer array is fed as ids: cast it to a float type\)$"
    with pytest.raises(LayerError, match=said):
        layer.forward(Arg(ids=np.zeros((2, 3), np.int64)))


def test_a_table_of_the_wrong_shape_is_a_table():
    layer = SelectiveFullyConnected(3, 10, name="sfc")
    x = Arg(np.zeros((4, 3), np.float32))
    said = r"must be a \(4, k\) table of columns, got ids of shape \(4,\)$"
    with pytest.raises(LayerError, match=said):
        layer.forward(x, Arg(ids=np.zeros(4, np.int64)))
