"""An error a layer names (``errors.named``) is still of its own class: its fields too, where
Python keeps them in C (a UnicodeError's), not in its ``__dict__``."""

import numpy as np
import pytest

from distconv import Arg
from distconv.layers.base import Layer, LayerError


class Decodes(Layer):
    """Reads its vocabulary's bytes in forward, in the wrong codec, or encodes or translates."""

    def __init__(self, how: str) -> None:
        super().__init__(name="vocab")
        self.how = how

    def _forward(self, x):
        if self.how == "decodes":
            b"ok \xff".decode("utf-8")
        elif self.how == "encodes":
            "ok \u00e9".encode("ascii")
        else:
            raise UnicodeTranslateError("ok \u00e9", 3, 4, "untranslatable")
        return x.value


@pytest.mark.parametrize(
    ("how", "error", "bad"),
    [
        ("decodes", UnicodeDecodeError, b"\xff"),
        ("encodes", UnicodeEncodeError, "\u00e9"),
        ("translates", UnicodeTranslateError, "\u00e9"),
    ],
)
def test_a_unicode_error_named_after_the_layer_keeps_its_fields(how, error, bad):
    """Named after the layer, a UnicodeDecodeError was one still, but with its C fields unset:
    ``e.object[e.start:e.end]``, as an ``except UnicodeDecodeError`` reads it, failed on None."""
    with pytest.raises(error, match=r"^Decodes 'vocab': ") as e:
        Decodes(how).forward(Arg(np.ones((2, 3))))
    assert isinstance(e.value, LayerError)
    cause = e.value.__cause__
    assert e.value.object[e.value.start : e.value.end] == bad
    assert (e.value.encoding, e.value.reason) == (cause.encoding, cause.reason)
