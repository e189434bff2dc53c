"""How :mod:`distconv.plain_json` writes what a function holds (its cells, its defaults, a
wrapper's function, a ``functools.singledispatch`` function's registry): the same in every
process whose configuration is the same, whatever that process has done with it (called it,
imported other modules first), and without an error where a value's attribute raises."""

from __future__ import annotations

import json

import pytest

from distconv import plain_json
from distconv.layers import settings


class _Unloaded:
    """An object whose ``__wrapped__`` raises (a lazy handle not yet loaded)."""

    def __init__(self, error: Exception):
        self.error = error

    @property
    def __wrapped__(self):
        raise self.error


class _UnloadedCall(_Unloaded):
    """One that is callable too: asked for what it wraps, as ``functools.cache``'s wrapper."""

    def __call__(self):
        return None


@pytest.mark.parametrize("error", [RuntimeError("not loaded"), KeyError("__wrapped__")])
def test_an_object_whose_wrapped_raises_is_written_not_an_error(error: Exception):
    """``__wrapped__`` was read of every object walked, before what decides it is no wrapper
    (not callable, a text of its own): one whose property raises stopped the job check and a
    layer's settings with that error. It is read only of a callable of no text of its own,
    and an error there means no wrapper."""
    written = {"class": "_Unloaded", "fields": {"error": str(error)}}
    assert json.loads(plain_json.dumps({"v": _Unloaded(error)})) == {"v": written}
    assert settings.setting_value(_Unloaded(error)) == written
    assert json.loads(plain_json.dumps(_UnloadedCall(error))) == {
        **written,
        "class": "_UnloadedCall",
    }
