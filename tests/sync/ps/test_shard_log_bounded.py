"""A peer flooding a shard with bad requests writes a few lines to its log, not one a request.

The shard logged a warning per bad request: 20,000 garbage headers from one process wrote
20,000 lines in under 4 s, and a node's disk filled in hours. Each (peer, cause) is logged in
full a few times a minute, then only by its count at each power of ten, as a worker's stray
replies are (``test_stray_replies_logged``); the stats' ``errors`` and ``/metrics`` still count
every one. Each line names the peer by its address and the rank whose key signed it, not by
ZeroMQ's routing id. A real keyed shard process, a real worker training beside a raw CURVE
socket that floods it.
"""

from __future__ import annotations

import threading

import pytest
import zmq
from ps_helpers import (
    assert_equals_local_training,
    batches,
    insecure_worker,
    raw_dealer,
    small_net,
    train_steps,
)

from distconv.optim import create_optimizer
from distconv.sync.ps import keys as keyfiles
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.request_log import MOST_TALLIED, PEER_LOGGED, REFUSALS_LOGGED
from distconv.sync.ps.wire import pack, unpack_header
from tests.probes import metric_families, shard_probe_port

FLOOD = 2000
STEPS = 6


def _keyed_dealer(ctx: zmq.Context, endpoint: str, keys: str, rank: int) -> zmq.Socket:
    """A bare DEALER signed with worker ``rank``'s key, connected to ``endpoint``."""
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    keyfiles.curve_client(sock, keyfiles.worker_keys(keys, rank))
    sock.connect(f"tcp://{endpoint}")
    return sock


def _flood(sock: zmq.Socket, requests: list[list[bytes]]) -> list[dict]:
    """Send each request and read its reply (the shard answers each bad one)."""
    replies = []
    for frames in requests:
        sock.send_multipart(frames)
        assert sock.poll(20_000), "the shard did not answer a bad request within 20 s"
        replies.append(unpack_header(sock.recv_multipart()[0], request=False))
    return replies


@pytest.mark.timeout(120)
def test_a_flood_of_bad_requests_logs_a_few_lines_and_counts_them_all(shards, job_keys):
    (endpoint,) = shards.start(1, workers=1, keys=job_keys, extra=["--health-port", "0"])
    net, data = small_net(), batches(STEPS, 8)
    sync = PServerSync(create_optimizer("sgd", lr=0.05), rank=0, world_size=1, pservers=[endpoint],
                       keys_dir=job_keys, timeout=30, block_bytes=64)  # fmt: skip
    ctx = zmq.Context()
    sock = _keyed_dealer(ctx, endpoint, job_keys, rank=1)  # admitted: a key of the job
    garbage = [[b"\xc1not msgpack %d" % i] for i in range(FLOOD)]
    stolen = pack({"op": "stats", "id": 7, "job": "local", "rank": 0})  # rank 1's key says 0
    failure: list[BaseException] = []

    def train() -> None:
        try:
            train_steps(net, sync, data)
        except BaseException as exc:  # noqa: BLE001 - the main thread raises it
            failure.append(exc)

    try:
        sync.setup(net.parameters())
        honest = threading.Thread(target=train)
        honest.start()
        replies = _flood(sock, garbage) + _flood(sock, [stolen] * 20)
        honest.join(60)
        assert not honest.is_alive() and not failure, failure
        (stats,) = sync.shard_stats()
    finally:
        sync.close()
        sock.close(0)
        ctx.term()
    assert all(r["op"] == "error" for r in replies), replies[:3]
    assert "rank 0 sent with another worker's key (rank 1's)" in replies[-1]["error"], replies[-1]
    assert stats["errors"] == FLOOD + 20, stats
    served = metric_families(shard_probe_port(shards.log_text()))["distconv_shard_errors"]
    assert served.samples[0].value == FLOOD + 20, served.samples
    assert_equals_local_training(net, data)  # the honest worker's steps, as if alone
    shards.stop()
    lines = shards.log_text().splitlines()
    peer = "127.0.0.1 (rank 1's key)"
    header_lines = [line for line in lines if "header is not msgpack" in line]
    key_lines = [line for line in lines if "another worker's key" in line]
    # in full, then the counts at 1, 10, 100, 1000 (FLOOD - REFUSALS_LOGGED unshown)
    assert len(header_lines) <= REFUSALS_LOGGED + 4, header_lines
    assert sum(f"bad request from {peer}: header is not msgpack" in x for x in header_lines) >= 1
    assert any(f"1000 more like this from {peer}" in line for line in header_lines), header_lines
    assert len(key_lines) <= REFUSALS_LOGGED + 2, key_lines  # 20: in full, then 1 and 10
    assert "\\x" not in "\n".join(header_lines + key_lines)  # no routing id


@pytest.mark.timeout(60)
def test_a_replay_of_the_run_before_logs_a_few_lines(shards):
    """Requests of a rank's run before its restart (a replay of a recorded run, a worker left
    alive beside its restart) were logged one line each, at INFO: now bounded as the rest, and
    naming the peer."""
    (endpoint,) = shards.start(1, workers=1)
    before = insecure_worker([endpoint])
    after = insecure_worker([endpoint])
    ctx = zmq.Context()
    sock = raw_dealer(ctx, endpoint)
    try:
        before.setup(small_net().parameters())
        after.setup(small_net().parameters())  # rank 0 again: a new run
        old = {"op": "pull", "job": "local", "rank": 0, "run": before._run, "blocks": [0]}
        replies = _flood(sock, [pack({**old, "id": i}) for i in range(FLOOD // 10)])
    finally:
        for sync in (before, after):
            sync.close()
        sock.close(0)
        ctx.term()
    assert all("of the run before, refused" in r["error"] for r in replies), replies[:2]
    shards.stop()
    refused = [line for line in shards.log_text().splitlines() if "run" in line and "pull" in line]
    assert len(refused) <= REFUSALS_LOGGED + 3, refused  # in full, then at 1, 10, 100
    assert any("100 more like this from 127.0.0.1" in line for line in refused), refused


@pytest.mark.timeout(60)
def test_a_peer_naming_a_new_op_in_each_request_logs_a_few_lines(shards):
    """The cause is the line's text: a peer choosing it anew for each request (an op name of
    its own, quoted in the refusal) made each line a first, all logged in full. A peer's lines
    of all causes are bounded too, then counted; more causes than the tallies kept at once no
    longer forget the peer's own tally, whose lines and counts then started over."""
    (endpoint,) = shards.start(1, workers=1)
    ctx = zmq.Context()
    sock = raw_dealer(ctx, endpoint)
    ops = ["x" + "".join(chr(97 + i // 26**k % 26) for k in range(3)) for i in range(FLOOD)]
    try:
        replies = _flood(sock, [pack({"op": op, "id": 1, "job": "local", "rank": 0}) for op in ops])
    finally:
        sock.close(0)
        ctx.term()
    assert all("unknown op" in r["error"] for r in replies), replies[:2]
    shards.stop()
    lines = [line for line in shards.log_text().splitlines() if "unknown op" in line]
    assert FLOOD > MOST_TALLIED
    assert len(lines) <= PEER_LOGGED + 4, lines  # in full, then the counts at 1, 10, 100, 1000
    assert f"unknown op '{ops[0]}'" in lines[0], lines  # a new cause's first line is shown
    assert any("100 more refusals from 127.0.0.1 of other causes" in x for x in lines), lines
