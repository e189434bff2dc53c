"""A parameter server trains float32 and float64 parameters only. An int64 one was seeded, and
then every optimizer failed on it at the first push: the shard failed the job ("update of
parameter n at step 1 failed on shard 0: UFuncTypeError ..."). The shard now refuses it at the
seed, and the worker at setup, before any hello, naming the parameter and its dtype."""

from __future__ import annotations

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.parameter import Parameter
from distconv.sync.ps.wire import WireError


@pytest.mark.timeout(60)
def test_a_seed_with_an_int64_parameter_is_refused_by_name(hand):
    h = hand(workers=1)
    sgd = {"name": "sgd", "lr": 0.1}
    head = {"op": "seed", "params": [["n", [4], "int64", False]], "table": [[0, 0, 0, 4]]}
    reply, _ = h.ask({**head, "optimizer": sgd}, [np.arange(4).reshape(4, 1)])
    assert reply["op"] == "error", reply
    assert reply["error"] == "seed: parameter 'n' is int64, not float32 or float64", reply
    assert not h.shard._traced and not h.shard.failed
    head = {"op": "seed", "params": [["n", [4], "float64", False]], "table": [[0, 0, 0, 4]]}
    reply, _ = h.ask({**head, "optimizer": sgd}, [np.zeros((4, 1))])
    assert reply["op"] == "ok", reply  # the shard goes on


@pytest.mark.timeout(60)
@pytest.mark.parametrize("static", [False, True])
def test_a_worker_refuses_an_int64_parameter_before_any_hello(static):
    sync = insecure_worker(["127.0.0.1:1"], timeout=2)  # nothing there: a hello would time out
    params = [Parameter("w", np.zeros(3)), Parameter("n", np.zeros(4, np.int64), static=static)]
    # a static one trains nothing, but the shards hold float32 and float64 only
    error = (WireError, "parameter 'n': dtype int64 cannot travel") if static else (
        TypeError, "parameter 'n' has dtype int64: only a floating-point parameter can train"
    )  # fmt: skip
    try:
        with pytest.raises(error[0], match=error[1]):
            sync.setup(params, {})
    finally:
        sync.close()
