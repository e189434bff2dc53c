"""A worker that found a shard gone (its process on this host ended) refuses every later request
to it at once, naming the shard, the first cause and the way on. Before, the process watch named
the shard once and then followed it no more: a script that caught the step's error and
evaluated (``allreduce_sum``), met (``barrier``) or trained on waited 1.5 x ``timeout`` again,
then said only that the shard gave no answer. A real shard, killed, on 127.0.0.1."""

from __future__ import annotations

import signal
import time

import pytest
from ps_helpers import batches, insecure_worker, small_net, train_steps

from distconv.sync.base import SyncError

TIMEOUT = 10  # a worker's wait: 15 s
#: far under one wait: a refusal without asking the shard
AT_ONCE = 2.0


@pytest.fixture
def gone(shards):
    """A worker that trained a step on a shard, the shard killed, and the step after failed
    naming it gone; the worker, its net, its shard's endpoint and that first error."""
    (endpoint,) = shards.start(1, 1)
    net, sync = small_net(), insecure_worker([endpoint], timeout=TIMEOUT)
    sync.setup(net.parameters())
    data = batches(2, 8)
    train_steps(net, sync, data[:1])
    shards.procs[0].kill()
    shards.procs[0].wait()
    with pytest.raises(SyncError, match="is gone: its process") as first:
        train_steps(net, sync, data[1:])
    yield sync, net, endpoint, str(first.value)
    sync.close()


def refused_at_once(call) -> str:
    began = time.monotonic()
    with pytest.raises(SyncError) as refused:
        call()
    assert time.monotonic() - began < AT_ONCE, refused.value
    return str(refused.value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "call",
    [
        lambda sync, net: sync.allreduce_sum([1.0]),  # evaluate's sums
        lambda sync, net: sync.barrier(),
        lambda sync, net: train_steps(net, sync, batches(1, 8)),
    ],
    ids=["allreduce_sum", "barrier", "step"],
)
def test_a_shard_found_gone_is_refused_at_once(gone, call):
    sync, net, endpoint, first = gone
    words = refused_at_once(lambda: call(sync, net))
    assert f"pserver shard 0 ({endpoint}) is gone: its process" in words
    assert first.partition("is gone: ")[2] in words  # the first cause, whole
    assert "found before" in words and "restart the shard, then set up again" in words
    assert first.partition("is gone: ")[2] in refused_at_once(lambda: call(sync, net))  # again


@pytest.mark.timeout(60)
def test_a_new_setup_asks_the_shard_afresh(gone):
    """The way on for a script: a new setup says hello to every shard, whatever was found
    before (here the shard is still gone: the hello is sent, and named unanswered)."""
    sync, net, endpoint, _ = gone
    sync.timeout = 0.5  # the hello's wait, short: the shard is not restarted here
    with pytest.raises(SyncError) as hello:
        sync.setup(net.parameters())
    assert "found before" not in str(hello.value) and endpoint in str(hello.value)


@pytest.mark.timeout(60)
def test_a_shard_restarted_serves_the_next_setup(shards, gone):
    """The way on the refusal names: the shard restarted at its address, a new setup trains
    on it."""
    sync, net, endpoint, _ = gone
    shards.start(1, 1, extra=["--bind", endpoint])  # the same address again
    sync.setup(net.parameters())
    train_steps(net, sync, batches(1, 8))
    assert sync.allreduce_sum([1.0]) == [1.0]


@pytest.mark.timeout(60)
def test_a_shard_that_only_gave_no_answer_is_asked_again(shards):
    """A shard whose process lives but does not answer (stopped here; slow, or a link down) is
    named unanswered at the limit, and not remembered as gone: once it answers again, the
    next request is served."""
    (endpoint,) = shards.start(1, 1)
    net, sync = small_net(), insecure_worker([endpoint], timeout=1)
    try:
        sync.setup(net.parameters())
        shards.procs[0].send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(SyncError) as silent:
                sync.allreduce_sum([1.0])
        finally:
            shards.procs[0].send_signal(signal.SIGCONT)
        assert "is gone: its process" not in str(silent.value), silent.value  # not remembered
        assert sync.allreduce_sum([2.0]) == [2.0]
    finally:
        sync.close()
