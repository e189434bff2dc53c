"""An error a layer names (``errors.named``) is still of its own class: its fields too, where
Python keeps them in C (a UnicodeError's), not in its ``__dict__``."""

import pickle

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


class Sealed(ValueError):
    """An error class that refuses subclasses of its own (a registry's, a sealed one)."""

    def __init_subclass__(cls, **kwargs):
        raise RuntimeError(f"{cls.__name__}: Sealed takes no subclasses")


class RaisesSealed(Layer):
    def _forward(self, x):
        raise Sealed("3 columns, needs 4")


def test_an_error_whose_class_refuses_subclasses_is_named_as_a_layer_error():
    """Named after the layer, an error is made of its class and the layer's: a class that
    refuses subclasses had its RuntimeError come out of forward in place of its own error."""
    with pytest.raises(LayerError, match=r"^RaisesSealed 'sealed': 3 columns, needs 4$") as e:
        RaisesSealed(name="sealed").forward(Arg(np.ones((2, 3))))
    assert type(e.value.__cause__) is Sealed


class OneOfEach(ValueError):
    """An error class whose ``__new__`` hands out one instance per class, made once (an
    interned error of one's own): a subclass asked for one gets the class's own."""

    _made: dict = {}

    def __new__(cls, *args):
        return OneOfEach._made.setdefault(OneOfEach, super().__new__(OneOfEach, *args))


class RaisesOneOfEach(Layer):
    def _forward(self, x):
        raise OneOfEach("3 columns, needs 4")


def test_an_error_class_whose_new_returns_another_object_is_named_as_a_layer_error():
    """The class of both made nothing of its own where the error's ``__new__`` returned an
    object of another class: the bare OneOfEach came out of forward, its message the layer's
    and no LayerError, and the class's shared instance written over."""
    with pytest.raises(LayerError, match=r"^RaisesOneOfEach 'once': 3 columns, needs 4$") as e:
        RaisesOneOfEach(name="once").forward(Arg(np.ones((2, 3))))
    assert type(e.value.__cause__) is OneOfEach
    assert OneOfEach._made[OneOfEach].args == ("3 columns, needs 4",)


@pytest.mark.parametrize("how", ["decodes", "encodes", "translates"])
def test_a_named_unicode_error_keeps_its_fields_when_pickled(how):
    """Pickled (sent back from a worker process, an MPI rank), the named UnicodeError was
    made again from its message and its ``__dict__`` alone: its C fields came back None."""
    with pytest.raises(UnicodeError) as e:
        Decodes(how).forward(Arg(np.ones((2, 3))))
    again = pickle.loads(pickle.dumps(e.value))
    assert type(again) is type(e.value)
    fields = ("encoding", "object", "start", "end", "reason")
    assert [getattr(again, f) for f in fields] == [getattr(e.value, f) for f in fields]
    assert str(again) == str(e.value)
