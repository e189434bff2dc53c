"""A refused ``set_state`` changes nothing: every array is checked before any is written (a
bad array for a later block once left the earlier blocks' optimizer state overwritten), and
keys that repeat or are not strings are refused like any other mismatch. In-process shard."""

from __future__ import annotations

import numpy as np
import pytest
from hand_shard import ROWS


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("keys", "arrays", "expect"),
    [
        (["velocity"], [np.ones((ROWS, 1)), np.ones((3, 1))], "block 1 'velocity'"),
        (["velocity", "velocity"], [np.ones((ROWS, 1))] * 4, "set_state keys"),
        ([["velocity"]], [np.ones((ROWS, 1))] * 2, "set_state keys"),
    ],
)
def test_a_refused_set_state_leaves_every_block_as_it_was(hand, keys, arrays, expect):
    h = hand()
    h.seed("momentum")
    reply, _ = h.ask({"op": "set_state", "blocks": [0, 1], "keys": keys}, arrays)
    assert reply["op"] == "error" and expect in reply["error"], reply
    assert not reply["error"].startswith("shard error"), reply
    reply, state = h.ask({"op": "get_state", "blocks": [0, 1]})
    assert reply["keys"] == ["velocity"], reply
    for velocity in state:  # still the seed's fresh state
        np.testing.assert_array_equal(velocity, np.zeros((ROWS, 1)))
    # and a good one after it is taken
    good = [np.full((ROWS, 1), 2.0), np.full((ROWS, 1), 3.0)]
    assert h.ask({"op": "set_state", "blocks": [0, 1], "keys": ["velocity"]}, good)[0]["op"] == "ok"
    _, state = h.ask({"op": "get_state", "blocks": [0, 1]})
    for got, want in zip(state, good):
        np.testing.assert_array_equal(got, want)
