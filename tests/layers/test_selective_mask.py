"""``SelectiveFullyConnected`` told a 0/1 mask over its output's columns (Paddle's ``select``
is one) from column indices: fed as an integer array, by ``fit`` as ids or by
``Network.forward`` as a value, the mask was read as columns 0 and 1 selected over and over,
and trained without a word."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.layers import LayerError, SelectiveFullyConnected

pytestmark = pytest.mark.timeout(60)

N, IN, OUT = 3, 4, 5
MASK = np.array([[0, 1, 0, 1, 0], [1, 0, 0, 1, 0], [0, 0, 1, 1, 0]])


def _forward(sel, out: int = OUT) -> Arg:
    net = Network()
    net.add("sfc", SelectiveFullyConnected(IN, out, dtype="float64"), ["x", "cols"])
    return net.forward({"x": np.ones((N, IN)), "cols": sel})["sfc"]


@pytest.mark.parametrize("dtype", [np.int64, np.uint8])
@pytest.mark.parametrize("fed", [lambda m: m, lambda m: Arg(ids=m)], ids=["value", "ids"])
def test_a_mask_is_told_to_be_column_indices_and_how(fed, dtype):
    with pytest.raises(LayerError, match=r"a table of 0s and 1s as wide as the output \(5\)"):
        _forward(fed(MASK.astype(dtype)))


def test_the_mask_as_the_message_says_selects_its_columns():
    m = MASK
    out = _forward(Arg(ids=np.nonzero(m)[1], seq_starts=np.r_[0, np.cumsum(m.sum(axis=1))]))
    assert out.ids.tolist() == [[1, 3], [0, 3], [2, 3]]


@pytest.mark.parametrize(
    "cols, out",
    [([[0, 1]] * N, 2), ([[1, 0]] * N, 2), ([[0, 1, 1]] * N, 5), ([[0, 1, 2, 3, 4]] * N, 5)],
    ids=["both columns of two", "reversed", "narrower than the output", "every column"],
)
def test_columns_of_0s_and_1s_that_are_no_mask_are_taken(cols, out):
    assert _forward(np.array(cols), out).ids.tolist() == cols
