"""An act= that is no activation name, of an unhashable type."""

import pytest

from distconv.layers import Activation, Conv2D, FullyConnected, LayerError


@pytest.mark.parametrize("act", [["relu"], {"relu": 1}, {"relu"}])
@pytest.mark.parametrize(
    "build", [lambda a: FullyConnected(3, 2, act=a), lambda a: Conv2D(1, 1, 1, act=a), Activation]
)
def test_an_unhashable_act_is_refused_naming_the_layer(build, act):
    # the name lookup raised "unhashable type: 'list'", naming neither the layer nor act=
    with pytest.raises(LayerError, match=r"unknown activation .*; choose one of \['linear'"):
        build(act)


def test_a_name_still_gives_its_activation():
    assert type(FullyConnected(3, 2, act="tanh").act).__name__ == "Tanh"
    assert type(FullyConnected(3, 2).act).__name__ == "Linear"
