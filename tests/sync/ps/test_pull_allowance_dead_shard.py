"""A shard that stops answering while a large pull is owed is named within the usual patience.

A large reply crossing a slow link looks like silence (ZeroMQ hands over whole messages only),
so a shard owing a pull was allowed its reply's bytes, once per worker, over
:data:`~distconv.sync.ps.channel.SLOW_LINK_BYTES`, on top of the timeout and of a stop's
patience: blindly, whether bytes arrived or not. A 1 GB model and 8 workers at 100 Mbit/s is
over ten minutes in which a dead shard (SIGSTOPped here, or its host gone) is not named, and a
stopping rank outlives the launcher's grace, killed silently. The allowance is now granted only
while bytes arrive on the shard's link (Linux's ``TCP_INFO``). Here ``SLOW_LINK_BYTES`` is cut
so that the blind allowance of this model's pull would be :data:`BLIND` seconds. Real shards.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time

import pytest
import zmq
from ps_helpers import asked_to_stop, batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.sync.base import SyncError
from distconv.sync.ps import channel
from distconv.sync.ps.links import Link

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="a link's bytes are read with Linux's TCP_INFO"
)

BLIND = 30.0  # the seconds the blind allowance would give the silent shard
TIMEOUT = 1.0  # a silent shard is named GRACE x this after its last reply or byte


@pytest.fixture
def stopped_shard(shards, monkeypatch):
    """Two async ranks on one shard, after a step; the shard then SIGSTOPped. Yields rank 1's
    sync; resumes the shard and closes the syncs."""
    (endpoint,) = shards.start(1, workers=2, mode="async", extra=["--timeout", "30"])
    nets = [small_net(seed=r) for r in range(2)]
    syncs = [insecure_worker([endpoint], r, 2, timeout=TIMEOUT) for r in range(2)]
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
        run_ranks(lambda r: train_steps(nets[r], syncs[r], batches(1, 8), r, 2), 2)
        model = sum(b.nbytes for b in syncs[1].layout.blocks)
        monkeypatch.setattr(channel, "SLOW_LINK_BYTES", model * 2 / BLIND)
        os.kill(shards.procs[0].pid, signal.SIGSTOP)
        yield syncs[1]
    finally:
        os.kill(shards.procs[0].pid, signal.SIGCONT)
        for s in syncs:
            s.close()


def _pull(sync) -> tuple[str, float]:
    """Rank 1's pull of every block (the one a refresh sends once the stats were answered):
    the error it raises, and how long it took."""
    start = time.monotonic()
    with pytest.raises(SyncError) as raised:
        sync._pull_all(stamps=[])
    return str(raised.value), time.monotonic() - start


@pytest.mark.timeout(90)
def test_a_silent_shard_owing_a_pull_is_named_at_the_timeout(stopped_shard):
    said, took = _pull(stopped_shard)
    assert said.startswith("rank 1: no answer to pull from pserver shard(s) 0 "), said
    assert took < BLIND / 3, f"named after {took:.1f} s, not the timeout's 1.5 s: {said}"


@pytest.mark.timeout(90)
def test_a_stopping_rank_names_a_silent_shard_owing_a_pull_at_the_patience(
    stopped_shard, monkeypatch
):
    monkeypatch.setattr(channel, "STOP_PATIENCE", 0.5)
    monkeypatch.setattr(stopped_shard, "timeout", 100.0)  # the stop's patience decides
    with asked_to_stop():
        said, took = _pull(stopped_shard)
    assert said.startswith("rank 1: asked to stop (SIGTERM), and pserver shard(s) 0 "), said
    assert took < BLIND / 3, f"named after {took:.1f} s, not the stop's 0.5 s: {said}"


@pytest.mark.timeout(30)
def test_a_link_says_how_long_ago_bytes_moved():
    ctx = zmq.Context()
    router, dealer = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
    try:
        monitor = dealer.get_monitor_socket(zmq.EVENT_CONNECTED)
        dealer.connect(f"tcp://127.0.0.1:{router.bind_to_random_port('tcp://127.0.0.1')}")
        assert monitor.poll(10_000), "no EVENT_CONNECTED"
        link = Link(zmq.utils.monitor.recv_monitor_message(monitor)["value"])
        dealer.send(b"hi")
        who, _ = router.recv_multipart()
        link.idle()  # sees the other side take "hi" in
        time.sleep(0.4)
        assert link.idle() >= 0.3  # nothing came back, nothing more was taken in
        router.send_multipart([who, b"x" * 1000])
        assert dealer.poll(10_000)
        assert link.idle() < 0.3  # bytes came
        time.sleep(0.4)
        assert link.idle() >= 0.3
        dealer.send(b"y" * 1000)
        router.recv_multipart()
        deadline = time.monotonic() + 0.25  # its ACK may be delayed (40 ms on Linux)
        while link.idle() >= 0.3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert link.idle() < 0.3  # the other side took bytes in (ACKs only came back)
        other = socket.socket()  # a descriptor that is not that connection says nothing
        try:
            assert Link(other.fileno()).idle() is None
        finally:
            other.close()
    finally:
        dealer.disable_monitor()
        monitor.close(linger=0)
        router.close(linger=0)
        dealer.close(linger=0)
        ctx.term()
