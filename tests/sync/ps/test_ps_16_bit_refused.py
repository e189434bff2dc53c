"""A parameter server keeps float32 and float64 parameters. A float16 or bfloat16 model (as
``Trainer(dtype="float16")`` casts one) failed at setup only in the wire's words, a
``WireError`` ("a message does not follow the protocol") with its traceback and no way out,
and its close then said bye to shards it had never greeted. The worker now refuses it at setup,
before any request, as a configuration error that names the dtype and what to do instead;
the same sync then sets up a float64 model on the same shards and trains as one process
does."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import zmq
from ps_helpers import (
    assert_equals_local_training,
    batches,
    insecure_worker,
    small_net,
    train_steps,
)

from distconv.runtime import RuntimeConfigError

#: the refusal, after the rank, the first parameter and its dtype (8 parameters in small_net)
WAY_OUT = (
    "(and 7 more): the parameter server keeps float32 or float64 parameters; train in float32 "
    "or float64, or in 16 bits over MPI (--sync mpi) or locally"
)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=["float16", "bfloat16"])
def test_a_16_bit_model_is_refused_before_any_request(dtype):
    """A bare ROUTER socket stands for the shard: whatever the worker sends (a hello, a setup
    failure's note, a bye at close) arrives there."""
    ctx = zmq.Context()
    listener = ctx.socket(zmq.ROUTER)
    listener.linger = 0
    port = listener.bind_to_random_port("tcp://127.0.0.1")
    sync = insecure_worker([f"127.0.0.1:{port}"], timeout=2)  # a hello would time out
    try:
        with pytest.raises(RuntimeConfigError) as info:
            sync.setup(small_net(dtype=dtype).parameters())
    finally:
        sync.close()
    try:
        name = np.dtype(dtype).name
        assert str(info.value) == f"rank 0: parameter 'conv1.weight' is {name} {WAY_OUT}"
        assert not listener.poll(300), listener.recv_multipart()  # nothing sent, close included
    finally:
        listener.close()
        ctx.term()


@pytest.mark.timeout(60)
def test_after_the_refusal_the_sync_trains_a_float64_model_on_the_same_shard(shards):
    endpoints = shards.start(1, workers=1)
    sync = insecure_worker(endpoints)
    data = batches(2, 8)
    try:
        with pytest.raises(RuntimeConfigError, match="parameter 'conv1.weight' is float16"):
            sync.setup(small_net(dtype=np.float16).parameters())
        net = small_net()
        sync.setup(net.parameters())
        train_steps(net, sync, data)
    finally:
        sync.close()
    assert_equals_local_training(net, data)
