"""FullyConnected's own arguments given wrongly are refused counting what the user passed.
Python's own error counted ``self``: ``FullyConnected(4, 3, 5, 6, 7, 8, 9)`` "takes from 3 to
5 positional arguments but 8 were given", though 4 are taken and 7 were given."""

import inspect

import numpy as np
import pytest

from distconv.init import set_seed
from distconv.layers import FullyConnected, SelectiveFullyConnected
from tests.layers.refusals import assert_refused_saying

FC_POSITIONALS = "in_features, out_features, bias, act"


class _Gained(FullyConnected):
    """A user's own layer with an option it requires: a misspelt one is missing and unexpected
    at once, and its refusal named no class (Python's own words escaped the binding)."""

    def _configure(self, gain: float) -> None:
        self.gain = gain


@pytest.mark.parametrize(
    "build,said",
    [
        (
            lambda: FullyConnected(4, 3, 5, 6, 7, 8, 9),
            f"FullyConnected: takes at most 4 positional arguments ({FC_POSITIONALS}), got 7; "
            "give the rest by keyword",
        ),
        (
            lambda: SelectiveFullyConnected(4, 6, True, None, "dense"),
            f"SelectiveFullyConnected: takes at most 4 positional arguments ({FC_POSITIONALS}), "
            "got 5; give the rest by keyword",
        ),
        (
            lambda: FullyConnected(),
            "FullyConnected: missing required arguments: 'in_features', 'out_features'",
        ),
        (
            lambda: SelectiveFullyConnected(4),
            "SelectiveFullyConnected: missing required argument: 'out_features'",
        ),
        (
            lambda: FullyConnected(4, out_feature=3),
            "FullyConnected: missing required argument: 'out_features' (got out_feature=: did "
            "you mean out_features=?)",
        ),
        (
            lambda: _Gained(4, 3, gian=2.0),
            "_Gained: got an unexpected keyword argument 'gian' (did you mean 'gain'?)",
        ),
        (
            lambda: FullyConnected(4, 3, out_features=3),
            "FullyConnected: multiple values for argument 'out_features' (given positionally "
            "and as out_features=: give it once)",
        ),
    ],
)
def test_a_wrong_call_counts_and_names_what_the_user_passed(build, said):
    assert_refused_saying(build, said)


def test_a_refused_call_draws_nothing():
    """Refused before the constructor runs: the next layer's weights are a fresh seed's."""
    set_seed(3)
    with pytest.raises(TypeError):
        FullyConnected(4, 3, True, None, "xavier")
    after = FullyConnected(4, 3).weight.value
    set_seed(3)
    np.testing.assert_array_equal(after, FullyConnected(4, 3).weight.value)


def test_help_still_shows_the_arguments_a_fully_connected_layer_takes():
    assert list(inspect.signature(FullyConnected).parameters)[:4] == FC_POSITIONALS.split(", ")
