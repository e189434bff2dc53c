"""Reshape called with a keyword it does not take is refused naming Reshape and the way out, as
FullyConnected and the convolutions are: it said ``Reshape.__init__() got an unexpected keyword
argument``, with no "did you mean", and ``shape=`` (paddle's and PyTorch's keyword) was not
told that the sizes are given positionally; nor Keras' ``target_shape=``, nor ``shap=``. Keras'
``input_shape=`` beside sizes given positionally is no such mistake, and is not told so."""

import pytest

from distconv.layers import Reshape
from tests.layers.refusals import assert_refused_saying


@pytest.mark.parametrize(
    "build,said",
    [
        (
            lambda: Reshape(3, 4, nam="r"),
            "Reshape: got an unexpected keyword argument 'nam' (did you mean 'name'?)",
        ),
        (
            lambda: Reshape(shape=(3, 4)),
            "Reshape: got an unexpected keyword argument 'shape' (shape is given positionally, "
            "not by keyword)",
        ),
        (
            lambda: Reshape(target_shape=(3, 4)),
            "Reshape: got an unexpected keyword argument 'target_shape' (shape is given "
            "positionally, not by keyword)",
        ),
        (
            lambda: Reshape(shap=(3, 4)),
            "Reshape: got an unexpected keyword argument 'shap' (shape is given positionally, "
            "not by keyword)",
        ),
        (  # Keras' input_shape= beside the sizes, which were given positionally: no hint
            lambda: Reshape(3, 4, input_shape=(12,)),
            "Reshape: got an unexpected keyword argument 'input_shape'",
        ),
    ],
    ids=["nam", "shape", "target_shape", "shap", "input_shape"],
)
def test_a_keyword_it_does_not_take_is_named_with_the_way_out(build, said):
    assert_refused_saying(build, said)


def test_its_signature_is_still_its_own():
    """help(Reshape) shows the sizes and the name, not the check's wrapper."""
    import inspect

    assert str(inspect.signature(Reshape)) == "(*shape: 'int', name: 'str | None' = None) -> 'None'"
