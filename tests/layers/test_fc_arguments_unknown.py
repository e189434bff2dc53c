"""A keyword no one takes is named even while a required argument is missing:
``FullyConnected(size=3, actt="relu")`` said only "missing required arguments: 'in_features',
'out_features'", and the misspelt ``actt=`` was named only once those were given."""

import pytest

from distconv.layers import Conv2D, FullyConnected, SelectiveFullyConnected
from tests.layers.refusals import assert_refused_saying

MISSING_BOTH = "missing required arguments: 'in_features', 'out_features'"


@pytest.mark.parametrize(
    "build,said",
    [
        (
            lambda: FullyConnected(size=3, actt="relu"),
            f"FullyConnected: {MISSING_BOTH}; got unexpected keyword arguments 'size', 'actt' "
            "(did you mean 'act' for 'actt'?)",
        ),
        (
            lambda: FullyConnected(actt="relu"),
            f"FullyConnected: {MISSING_BOTH}; got an unexpected keyword argument 'actt' "
            "(did you mean 'act'?)",
        ),
        (
            lambda: FullyConnected(4, size=3),
            "FullyConnected: missing required argument: 'out_features'; got an unexpected "
            "keyword argument 'size'",
        ),
        (
            lambda: FullyConnected(4, out_feature=3, actt="relu"),
            "FullyConnected: missing required argument: 'out_features' (got out_feature=: did "
            "you mean out_features=?); got an unexpected keyword argument 'actt' (did you mean "
            "'act'?)",
        ),
        (  # a subclass's own option is checked against the method it is handed on to
            lambda: SelectiveFullyConnected(4, methd="dense"),
            "SelectiveFullyConnected: missing required argument: 'out_features'; got an "
            "unexpected keyword argument 'methd' (did you mean 'method'?)",
        ),
        (
            lambda: Conv2D(3, 4, biass=False),
            "Conv2D: missing required argument: 'kernel_size'; got an unexpected keyword "
            "argument 'biass' (did you mean 'bias'?)",
        ),
    ],
)
def test_an_unknown_keyword_is_named_beside_the_missing_arguments(build, said):
    assert_refused_saying(build, said)


@pytest.mark.parametrize(
    "build,said",
    [
        (
            lambda: SelectiveFullyConnected(4, method="dense"),
            "SelectiveFullyConnected: missing required argument: 'out_features'",
        ),
        (lambda: Conv2D(3, 4, bias=False), "Conv2D: missing required argument: 'kernel_size'"),
    ],
)
def test_an_option_the_layer_takes_is_not_called_unknown(build, said):
    assert_refused_saying(build, said)
