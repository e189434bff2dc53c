"""A typo or an extra argument in a convolution is refused naming the class the user called, as
FullyConnected's are: it named a private method ("ConvNd._build() got an unexpected keyword
argument 'bais'"), and a part given bias= or act= was not told where they belong. A misspelt
option names the one it is close to, and one given twice says to give it once, for both."""

import numpy as np
import pytest

from distconv.init import set_seed
from distconv.layers import (
    Conv2D,
    Conv3D,
    ConvOperator,
    ConvProjection,
    ConvTranspose2D,
    ConvTransposeProjection,
    FullyConnected,
    SelectiveFullyConnected,
)
from tests.layers.refusals import assert_refused_saying

LAYER_POSITIONALS = (
    "in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, act"
)
PART_POSITIONALS = "in_channels, out_channels, kernel_size, stride, padding, dilation, groups"


@pytest.mark.parametrize(
    "build,said",
    [
        (
            lambda: Conv2D(3, 10, 3, bais=None),
            "Conv2D: got an unexpected keyword argument 'bais' (did you mean 'bias'?)",
        ),
        (
            lambda: ConvTranspose2D(3, 10, 3, output_pading=1),
            "ConvTranspose2D: got an unexpected keyword argument 'output_pading' (did you mean "
            "'output_padding'?)",
        ),
        (
            lambda: Conv2D(1, 2, 3, 1, 0, 1, 1, "shared", "relu", "extra"),
            f"Conv2D: takes at most 9 positional arguments ({LAYER_POSITIONALS}), got 10; "
            "give the rest by keyword",
        ),
        (
            lambda: Conv3D(1, 2, 3, 1, 0, 1, 1, "shared", bias=None),
            "Conv3D: multiple values for argument 'bias' (given positionally and as bias=: give it "
            "once)",
        ),
        (
            lambda: ConvProjection(1, 2, 3, 1, 0, 1, 1, True, input_size=4),
            f"ConvProjection: takes at most 7 positional arguments ({PART_POSITIONALS}), got 8; "
            "give the rest by keyword",
        ),
        (
            lambda: ConvOperator(2, 3, 3, input_size=4, scale=2),
            "ConvOperator: got an unexpected keyword argument 'scale'",
        ),
    ],
)
def test_a_wrong_option_is_refused_naming_the_class(build, said):
    assert_refused_saying(build, said)


@pytest.mark.parametrize(
    "build,said",
    [
        (
            lambda: ConvProjection(1, 2, 3, input_size=4, bias=True),
            "ConvProjection: got an unexpected keyword argument 'bias' (a projection has no "
            "bias: give bias= to the layer that adopts it)",
        ),
        (
            lambda: ConvTransposeProjection(1, 2, 3, input_size=4, act="relu"),
            "ConvTransposeProjection: got an unexpected keyword argument 'act' (a projection "
            "has no activation: give act= to the layer that adopts it)",
        ),
        (
            lambda: ConvOperator(2, 3, 3, input_size=4, bias=True),
            "ConvOperator: got an unexpected keyword argument 'bias' (an operator has no "
            "bias: give bias= to the layer that adopts it)",
        ),
    ],
)
def test_a_part_given_bias_or_act_is_told_the_layer_that_adopts_it_takes_them(build, said):
    assert_refused_saying(build, said)


def test_a_refused_convolution_draws_nothing_and_fc_says_as_before():
    """Refused before any weight is drawn: the next layer's weights are those of a fresh seed.
    FullyConnected's refusal, now through the same binding, reads as it did."""
    set_seed(7)
    with pytest.raises(TypeError):
        Conv2D(2, 3, 3, bais=None)
    after = Conv2D(2, 3, 3).weight.value
    set_seed(7)
    np.testing.assert_array_equal(after, Conv2D(2, 3, 3).weight.value)
    with pytest.raises(TypeError, match=r"^FullyConnected: got an unexpected keyword argument"):
        FullyConnected(4, 3, bais=None)


@pytest.mark.parametrize(
    "build,said",
    [
        (
            lambda: FullyConnected(4, 3, bais=None),
            "FullyConnected: got an unexpected keyword argument 'bais' (did you mean 'bias'?)",
        ),
        (
            lambda: SelectiveFullyConnected(4, 6, methd="dense"),
            "SelectiveFullyConnected: got an unexpected keyword argument 'methd' (did you mean "
            "'method'?)",
        ),
        (
            lambda: Conv2D(3, 10, 3, inpt_size=8),
            "Conv2D: got an unexpected keyword argument 'inpt_size' (did you mean 'input_size'?)",
        ),
        (
            lambda: FullyConnected(4, 3, scale=2),
            "FullyConnected: got an unexpected keyword argument 'scale'",
        ),
    ],
)
def test_a_misspelt_option_names_the_one_it_is_close_to(build, said):
    """The constructor's own options (bias=, input_size=) count as well as the method's, for a
    fully connected layer as for a convolution; no guess where none is close."""
    assert_refused_saying(build, said)
