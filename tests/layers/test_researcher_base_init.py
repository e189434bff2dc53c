"""A layer of one's own whose ``__init__`` skips, misorders or repeats the base's: told where
it is made; its own errors there pass as they are."""

import dataclasses

import numpy as np
import pytest

from distconv import Network, Parameter
from distconv.layers.base import Layer
from distconv.layers.inputs import values_of
from tests.layers.researcher_layers import Gain, Scale


class NoBase(Layer):
    """Keeps its own fields and never calls Layer.__init__."""

    def __init__(self, n: int) -> None:
        self.n = n

    def _forward(self, x):
        return 2 * values_of(self, x)


class ParamsFirst(Layer):
    """Makes its weight before Layer.__init__ has run."""

    def __init__(self, n: int) -> None:
        self.w = self.new_param("w", np.ones(n))
        super().__init__()


class CallsNoBase(NoBase):
    """Calls its parent's __init__, as it should: the parent is the one that skips the base."""

    def __init__(self, n: int) -> None:
        super().__init__(n)


class ParamLater(Gain):
    """Makes its Parameter before calling the base, as it may: the base runs before it adds."""

    def __init__(self, n: int) -> None:
        weight = Parameter("w", np.ones(n))
        super().__init__(weight, act="tanh")


def test_a_layer_whose_init_skips_the_base_s_is_told_where_it_is_made():
    """Each was made (or failed) with a bare AttributeError: "'NoBase' object has no attribute
    '_owned'" at Network.add, "'ParamsFirst' object has no attribute 'name'" in new_param."""
    with pytest.raises(TypeError, match=r"NoBase.__init__ returned without calling super"):
        NoBase(3)
    with pytest.raises(TypeError, match=r"ParamsFirst.__init__ failed \(.*'name'\) before call"):
        ParamsFirst(3)
    with pytest.raises(TypeError, match=r"^NoBase.__init__ returned without calling super"):
        CallsNoBase(3)  # the class whose __init__ skipped it, not the one being made
    layer = ParamLater(3)
    assert layer.w.name == "w" and type(layer.act).__name__ == "Tanh"


class Config:
    """A layer's settings, read in its ``__init__`` before the base's."""

    width = 3


class ReadsConfig(Layer):
    """Reads a setting its config lacks before calling the base, as a typo does."""

    def __init__(self, config: Config) -> None:
        self.width = config.widht  # the typo: its own AttributeError, not a skipped base
        super().__init__()


def test_an_attribute_error_of_the_layer_s_own_passes_as_it_is():
    """A config's typo read before super().__init__() was re-raised as a TypeError saying the
    base was skipped and to call it before new_param: neither was the matter."""
    with pytest.raises(AttributeError, match=r"'Config' object has no attribute 'widht'"):
        ReadsConfig(Config())


@dataclasses.dataclass(eq=False)
class Widths(Layer):
    """A dataclass layer whose made-up ``__init__`` never calls the base's: the dataclass sets
    it after ``__init_subclass__`` wrapped the class's own, so the check never saw it."""

    width: int = 3


def test_a_dataclass_layer_that_skips_the_base_s_init_is_told_so_when_added():
    """It was added with "'Widths' object has no attribute '_owned'", the far-away error the
    base-init check names; one calling the base in __post_init__ is added as before."""
    net = Network()
    with pytest.raises(TypeError, match=r"^Widths was made without calling super\(\).__init__"):
        net.add("w", Widths(), inputs="x")

    @dataclasses.dataclass(eq=False)
    class PostInit(Widths):
        def __post_init__(self) -> None:
            Layer.__init__(self)  # the base's: super() reaches Widths' dataclass __init__

    assert net.add("w", PostInit(), inputs="x").name == "w"


class BaseTwice(Scale):
    """Calls the base again after making its weights, to set the activation."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        super(Scale, self).__init__(act="tanh")


def test_a_second_base_init_is_refused_not_left_to_drop_the_weights_made_since():
    """The second Layer.__init__ emptied the registry: the network held no parameter, and
    w and b never trained, without a word."""
    with pytest.raises(TypeError, match=r"^BaseTwice: a second Layer.__init__ drops \['w'"):
        BaseTwice(3)
