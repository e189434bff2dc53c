"""A convolution's own arguments given wrongly (one missing, one given twice, a misspelt
``kernel_size``) are refused naming the class the user called. Python's own error named the
mixin that defines the constructor ("Convolution.__init__() missing 1 required positional
argument"), a class no user writes."""

import inspect

import pytest

from distconv.layers import (
    Conv2D,
    Conv3D,
    ConvOperator,
    ConvProjection,
    ConvTranspose2D,
    ConvTranspose3D,
    ConvTransposeProjection,
)
from tests.layers.refusals import assert_refused_saying

CONVOLUTIONS = (
    Conv2D,
    Conv3D,
    ConvTranspose2D,
    ConvTranspose3D,
    ConvProjection,
    ConvTransposeProjection,
    ConvOperator,
)


@pytest.mark.parametrize("kind", CONVOLUTIONS, ids=lambda k: k.__name__)
def test_a_missing_argument_names_the_class_called_and_every_missing_one(kind):
    with pytest.raises(TypeError) as caught:
        kind(3)
    assert str(caught.value) == (
        f"{kind.__name__}: missing required arguments: 'out_channels', 'kernel_size'"
    )


@pytest.mark.parametrize(
    "build,said",
    [
        (lambda: Conv2D(3, 10), "Conv2D: missing required argument: 'kernel_size'"),
        (
            lambda: Conv3D(),
            "Conv3D: missing required arguments: 'in_channels', 'out_channels', 'kernel_size'",
        ),
        (
            lambda: Conv2D(3, 10, 3, in_channels=3),
            "Conv2D: multiple values for argument 'in_channels' (given positionally and as "
            "in_channels=: give it once)",
        ),
        (
            lambda: ConvTranspose3D(3, 4, kernal_size=3),
            "ConvTranspose3D: missing required argument: 'kernel_size' (got kernal_size=: did "
            "you mean kernel_size=?)",
        ),
        (
            lambda: ConvProjection(1, 2, 3, 1, 0, 1, 1, stride=2, input_size=4),
            "ConvProjection: multiple values for argument 'stride' (given positionally and as "
            "stride=: give it once)",
        ),
    ],
)
def test_a_wrong_call_says_what_is_wrong_and_the_way_out(build, said):
    assert_refused_saying(build, said)


def test_help_still_shows_the_arguments_a_convolution_takes():
    """The check wraps the constructor; help() and inspect read the wrapped one's signature."""
    assert list(inspect.signature(Conv2D).parameters)[:3] == [
        "in_channels",
        "out_channels",
        "kernel_size",
    ]
