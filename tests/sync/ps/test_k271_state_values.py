"""Optimizer state to restore whose value is no array of numbers (``{"w": {"step": None}}``) is
refused by ``LocalSync`` and ``PServerSync`` with the ``load_state_dict`` error that names it,
and nothing is copied. Review k271 of 8f9f704, which named entries that are no mapping: a
value of a scalar buffer (Adam's ``step``, shape ``()``) passed the shape check, as
``np.shape(None)`` is ``()``; LocalSync then copied ``m`` and ``v`` before a bare TypeError
(``int() argument must be ... not 'NoneType'``) on ``step``, and PServerSync raised it too."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker
from test_k269_state_entries import _load

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.local import LocalSync

pytestmark = pytest.mark.timeout(120)


def _state(**given) -> dict:
    """Adam's state for the (2, 3) parameter ``w`` of ``_load``, with ``given`` in it."""
    return {"w": {"m": np.full((2, 3), 5.0), "v": np.full((2, 3), 7.0), "step": 3, **given}}


CASES = [
    (_state(step=None), "w/step: a NoneType given, not an array of numbers"),
    (_state(step="x"), "w/step: a str given, not an array of numbers"),
    (_state(step={}), "w/step: a dict given, not an array of numbers"),
    (_state(m=np.full((2, 3), "x")), "w/m: a ndarray of <U1 given, not an array of numbers"),
    (_state(m=[[1.0, 2.0, 3.0], [4.0]]), "w/m: a list given, not an array of numbers"),
]


@pytest.mark.parametrize("state, why", CASES)
def test_a_value_that_is_no_numbers_is_refused_with_its_name_locally(state, why):
    said = _load(LocalSync(create_optimizer("adam", lr=0.1)), state)
    assert said.startswith("LocalSync.load_state_dict: ") and why in said, said


@pytest.mark.parametrize("state, why", CASES)
def test_a_value_that_is_no_numbers_is_refused_with_its_name_on_the_shards(shards, state, why):
    sync = insecure_worker(shards.start(1, workers=1), optimizer="adam", lr=0.1)
    said = _load(sync, state)
    assert said.startswith("PServerSync.load_state_dict: ") and why in said, said


@pytest.mark.parametrize("sync", ["local", "pserver"])
def test_numbers_in_any_form_are_still_taken(shards, sync):
    """A guard: lists, Python scalars, integer and bool arrays are numbers copy_into takes."""
    if sync == "local":
        s = LocalSync(create_optimizer("adam", lr=0.1))
    else:
        s = insecure_worker(shards.start(1, workers=1), optimizer="adam", lr=0.1)
    try:
        s.setup([Parameter("w", np.ones((2, 3)))])
        given = {"m": [[1, 2, 3], [4, 5, 6]], "v": np.ones((2, 3), bool), "step": np.int32(4)}
        s.load_state_dict({"w": given})
        got = s.state_dict()["w"]
        np.testing.assert_array_equal(got["m"], [[1, 2, 3], [4, 5, 6]])
        np.testing.assert_array_equal(got["v"], np.ones((2, 3)))
        assert int(got["step"]) == 4
    finally:
        s.close()
