"""A seed naming a sparse parameter of shape [] (a scalar has no rows) is refused as malformed,
in one line, instead of failing inside the shard (IndexError, logged as a shard bug with a
traceback); the shard then takes a good seed. In-process shard."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.timeout(60)
def test_a_sparse_scalar_parameter_is_refused_as_malformed(hand):
    h = hand()
    head = {"op": "seed", "optimizer": {"name": "sgd", "lr": 1.0}, "table": [[0, 0, 0, 1]]}
    reply, _ = h.ask({**head, "params": [["s", [], "float64", True]]}, [np.zeros((1, 1))])
    assert reply["op"] == "error", reply
    assert "sparse parameter 's' has shape []: a table needs rows" in reply["error"], reply
    assert h.shard._traced is False  # no failure the checks did not foresee
    reply, _ = h.ask({**head, "params": [["s", [], "float64", False]]}, [np.zeros((1, 1))])
    assert reply["op"] == "ok", reply
