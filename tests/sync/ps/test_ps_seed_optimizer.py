"""A seed's optimizer config is received text: a ``name`` that is not a string
failed with an AttributeError (a "shard error" and a traceback in the log), and a config
without a name was quoted whole in the error, so a large one made an error reply over the
header cap that rank 0 could not read. Both are refused in one short line; the shard goes on."""

from __future__ import annotations

import numpy as np
from hand_shard import PARAMS, ROWS

from distconv.sync.ps.wire import MAX_HEADER_BYTES


def _seed(h, optimizer: dict) -> dict:
    head = {"op": "seed", "params": PARAMS, "table": [[0, 0, 0, ROWS]], "optimizer": optimizer}
    return h.ask(head, [np.zeros((ROWS, 1))])[0]


def test_a_name_that_is_not_a_string_is_refused_by_name(hand):
    h = hand()
    reply = _seed(h, {"name": 5, "lr": 0.1})
    assert reply["op"] == "error", reply
    assert reply["error"] == "optimizer config: name 5 is not a string", reply
    assert not h.shard._traced  # a refusal, not a failure no check foresaw
    assert _seed(h, {"name": "sgd", "lr": 0.1})["op"] == "ok"


def test_a_large_config_without_a_name_is_refused_in_a_reply_rank_0_can_read(hand):
    h = hand()
    # under the request's header cap, not under its cap once quoted by repr
    big = {"lr": 0.1, **{f"k{i}": 0.30000000000000004 for i in range(60_000)}}
    reply = _seed(h, big)  # the reply is read with the header cap: it raised WireError here
    assert reply["op"] == "error" and "no 'name'" in reply["error"], reply
    assert len(reply["error"]) < 400
    assert len(h.sent[-1][0][0]) < MAX_HEADER_BYTES
