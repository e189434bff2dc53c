"""A projection's weight read before a layer adopts it: an untied one's is made by the layer
(reading it earlier is refused, naming the projection); one tied with weight= reads the
shared weight."""

import numpy as np
import pytest

from distconv import Arg
from distconv.layers import (
    ContextProjection,
    FullMatrixProjection,
    LayerError,
    Mixed,
    SliceProjection,
    TableProjection,
    TransposedFullMatrixProjection,
)

F64 = np.float64


def test_tying_to_a_table_not_yet_adopted_is_refused_not_left_untied():
    # table.weight was None here, which weight= reads as "make a new one": the output
    # projection trained a weight of its own, with no error
    table = TableProjection(7, 3, dtype=F64)
    with pytest.raises(LayerError, match=r"TableProjection: its weight is made when a layer"):
        FullMatrixProjection(3, 7, dtype=F64, weight=table.weight)
    Mixed([table])
    out = FullMatrixProjection(3, 7, dtype=F64, weight=table.weight)
    layer = Mixed([out])
    assert out.weight is table.weight
    h = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(layer(Arg(h)).value, h @ table.weight.value.T, rtol=1e-12)


def test_forward_of_a_projection_not_yet_adopted_names_it():
    proj = FullMatrixProjection(3, 2)
    with pytest.raises(LayerError, match=r"FullMatrixProjection: its weight is made when"):
        proj.forward(Arg(np.ones((2, 3), np.float32)), np.zeros((2, 2), np.float32))


def test_projections_without_a_weight_read_none_before_and_after():
    parts = [SliceProjection(4, [(0, 2)]), ContextProjection(3, 3)]
    assert [p.weight for p in parts] == [None, None]
    Mixed([parts[0]])
    Mixed([parts[1]])
    assert [p.weight for p in parts] == [None, None]


def test_a_tied_projection_not_yet_adopted_reads_its_shared_weight():
    # it raised "its weight is made when a layer adopts it", untrue for a tied one, and a
    # third projection could not be tied through it
    table = TableProjection(7, 3, dtype=F64)
    Mixed([table])
    tied = FullMatrixProjection(3, 7, dtype=F64, weight=table.weight)
    assert tied.weight is table.weight
    third = FullMatrixProjection(3, 7, dtype=F64, weight=tied.weight)
    layer, other = Mixed([tied]), Mixed([third])
    assert third.weight is tied.weight is table.weight
    h = np.arange(6.0).reshape(2, 3)
    want = h @ table.weight.value.T
    np.testing.assert_allclose(layer(Arg(h)).value, want, rtol=1e-12)
    np.testing.assert_allclose(other(Arg(h)).value, want, rtol=1e-12)


def test_a_tied_projection_freed_by_a_failed_layer_still_reads_its_shared_weight():
    table = TableProjection(5, 2, dtype=F64)
    Mixed([table])
    tied = TransposedFullMatrixProjection(5, 2, weight=table.weight)
    with pytest.raises(LayerError, match=r"writes 2 columns, but the layer's size is 4"):
        Mixed([tied], size=4)
    assert tied.owner is None and tied.weight is table.weight


def test_an_untied_projection_not_yet_adopted_is_still_refused():
    with pytest.raises(LayerError, match=r"its weight is made when a layer adopts it"):
        FullMatrixProjection(3, 7, weight=FullMatrixProjection(3, 2).weight)
