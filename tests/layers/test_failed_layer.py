"""A projection layer that fails to build leaves its parts free."""

import numpy as np
import pytest

from distconv import Arg
from distconv.layers import (
    Concatenate2,
    DotMulOperator,
    FullMatrixProjection,
    LayerError,
    Mixed,
    TableProjection,
)

F64 = np.float64


def test_a_part_of_a_layer_that_failed_to_build_can_be_adopted_again():
    proj = FullMatrixProjection(3, 2, dtype=F64)
    with pytest.raises(LayerError, match=r"writes 2 columns, but the layer's size is 5"):
        Mixed([proj], size=5)
    # it was refused: "already attached to Mixed as 'proj0'", a layer that never existed
    layer = Mixed([proj], name="m")
    assert proj.owner is layer and proj.weight.name == "m.proj0.weight"
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(layer(Arg(x)).value, x @ proj.weight.value.T, rtol=1e-12)


def test_a_failed_bias_frees_every_adopted_part_and_its_shared_weight():
    table = TableProjection(5, 2, dtype=F64)
    Mixed([table])
    tied = TableProjection(5, 2, weight=table.weight)
    other = FullMatrixProjection(4, 2, dtype=F64)
    with pytest.raises(LayerError, match=r"bias: dtype=int32 is not a float type"):
        Concatenate2([tied, other], bias=True, dtype=np.int32)
    layer = Concatenate2([tied, other], bias=True, dtype=F64)
    assert tied.weight is table.weight and [p.owner for p in (tied, other)] == [layer] * 2
    assert layer.parameters() == [table.weight, other.weight, layer.bias]


def test_an_operator_given_twice_is_refused_and_left_free():
    op = DotMulOperator(2.0)
    with pytest.raises(LayerError, match=r"already attached to Mixed as 'op0'"):
        Mixed([None, None], [op, op], size=3)
    layer = Mixed([None, None], [op], size=3)
    a, b = np.ones((1, 3)), np.full((1, 3), 3.0)
    np.testing.assert_array_equal(layer(Arg(a), Arg(b)).value, [[6.0, 6.0, 6.0]])


def test_a_part_serving_another_layer_stays_with_it():
    proj = FullMatrixProjection(3, 2)
    first = Mixed([proj])
    with pytest.raises(LayerError, match=r"already attached"):
        Mixed([proj])
    assert proj.owner is first and proj.weight is first.parameters()[0]


@pytest.mark.parametrize(
    "build, what",
    [
        (lambda: Mixed(FullMatrixProjection(3, 2)), "projections must be a list .*FullMatrixProj"),
        (lambda: Mixed([FullMatrixProjection(3, 2)], 2), "operators must be a list .*got int"),
        (lambda: Mixed([None, None], DotMulOperator(), size=3), "operators must be a list"),
        (lambda: Concatenate2(FullMatrixProjection(3, 2)), "Concatenate2: projections must be"),
    ],
)
def test_parts_not_given_as_a_list_are_refused_naming_the_layer(build, what):
    # list() failed on them: "'int' object is not iterable", naming no layer and no argument
    with pytest.raises(LayerError, match=what) as caught:
        build()
    assert isinstance(caught.value, TypeError)
