"""A worker's wait for many replies is bounded by the shards' silence, not by its length
(review k182): the limit (``GRACE`` x ``timeout``) ran from the wait's start, so a wait of
many replies (a step's pushes, a seed or a pull in many parts: a large model on a slow link)
that took longer than the limit failed, naming as silent shards whose replies kept coming,
while the shard's own limit is per request. The shards here are real ROUTER sockets on
127.0.0.1 that answer one request each, one after another, each within the limit of the
one before, all of them past it."""

from __future__ import annotations

import threading
import time

import pytest
import zmq
from ps_helpers import insecure_worker

from distconv.sync.base import SyncError
from distconv.sync.ps.wire import pack, unpack_header

SHARDS, GAP, TIMEOUT = 4, 0.3, 0.4  # the worker's limit: 1.5 x 0.4 = 0.6 s > GAP


def _answer_in_turn(socks: list[zmq.Socket], gaps: list[float], stop) -> None:
    """Read every shard's request, then answer them in shard order, shard ``s`` ``gaps[s]``
    seconds after the one before (until ``stop``)."""
    asked = []
    for sock in socks:
        if not sock.poll(10_000) or stop.is_set():
            return
        ident, head = sock.recv_multipart()
        asked.append((sock, ident, unpack_header(head)["id"]))
    for (sock, ident, rid), gap in zip(asked, gaps):
        if stop.wait(gap):
            return
        sock.send_multipart([ident, *pack({"id": rid, "op": "ok", "stats": {"pushes": 0}})])


@pytest.mark.timeout(60)
def test_a_wait_goes_on_while_replies_keep_coming_and_names_shards_silent_past_the_limit():
    ctx = zmq.Context()
    socks = [ctx.socket(zmq.ROUTER) for _ in range(SHARDS)]
    for s in socks:
        s.linger = 0
    ports = [s.bind_to_random_port("tcp://127.0.0.1") for s in socks]
    sync = insecure_worker([f"127.0.0.1:{p}" for p in ports], timeout=TIMEOUT)
    stop = threading.Event()
    shards = threading.Thread(target=_answer_in_turn, args=(socks, [GAP] * SHARDS, stop))
    shards.start()
    silent = threading.Thread(target=_answer_in_turn, args=(socks, [0.0] + [30.0] * 3, stop))
    try:
        began = time.monotonic()
        stats = sync.shard_stats()  # one request per shard, in one wait
        assert stats == [{"pushes": 0}] * SHARDS
        assert time.monotonic() - began > 1.5 * TIMEOUT  # longer than the limit, as meant
        # shards silent for the limit after the latest reply are named then, as before
        shards.join(10)
        silent.start()
        began = time.monotonic()
        with pytest.raises(SyncError, match=r"no answer to stats from pserver shard\(s\) 1 \("):
            sync.shard_stats()  # shard 0 answers at once, the others never
        assert time.monotonic() - began < 10
    finally:
        stop.set()
        shards.join(10)
        if silent.is_alive():
            silent.join(10)
        sync.close()
        for s in socks:
            s.close(0)
        ctx.term()
