"""A shard logs and counts the connections it refuses.

A connection with a key not the job's got nothing back, as it should, but the shard said
nothing either, not even at ``-v``: an operator never saw an intrusion attempt. Each refusal is
now a warning naming the peer's address and its key (a few per peer and cause), and counted in
``distconv_shard_refused_connections_total``. A real keyed shard process, real CURVE sockets.
"""

from __future__ import annotations

import threading
import time

import pytest
import zmq
from ps_helpers import raw_dealer

from distconv.sync.ps import keys as keyfiles
from distconv.sync.ps.request_log import MOST_LOGGED, REFUSALS_LOGGED
from distconv.sync.ps.wire import pack
from tests.probes import metric_families, shard_probe_port

#: the connections a stranger makes, each with a new key
TRIES = 40
STATS = pack({"op": "stats", "id": 1, "job": "local", "rank": 0})


def _refused_count(port: int) -> float:
    family = metric_families(port)["distconv_shard_refused_connections"]
    return family.samples[0].value


def _wait_for_count(port: int, count: int, seconds: float = 20) -> float:
    deadline = time.monotonic() + seconds
    while (seen := _refused_count(port)) < count and time.monotonic() < deadline:
        time.sleep(0.1)
    return seen


def _ask(
    ctx: zmq.Context, endpoint: str, keys: tuple[bytes, bytes, bytes] | None, wait_ms: int = 1000
) -> bool:
    """Whether a stats request on a connection with ``keys`` (CURVE client keys; None: no
    CURVE) is answered within ``wait_ms``."""
    sock = raw_dealer(ctx, endpoint) if keys is None else ctx.socket(zmq.DEALER)
    try:
        if keys is not None:
            sock.linger = 0
            keyfiles.curve_client(sock, keys)
            sock.connect(f"tcp://{endpoint}")
        try:
            sock.send_multipart(STATS, zmq.NOBLOCK)
        except zmq.Again:  # no handshake completed: no peer to queue it for
            return False
        return bool(sock.poll(wait_ms))
    finally:
        sock.close(0)


@pytest.mark.timeout(60)
def test_a_key_not_the_jobs_is_refused_logged_and_counted(shards, job_keys, tmp_path):
    (endpoint,) = shards.start(1, workers=2, keys=job_keys, extra=["--health-port", "0"])
    port = shard_probe_port(shards.log_text())
    server_public = keyfiles.worker_keys(job_keys, 0)[2]
    stranger = zmq.curve_keypair()  # a key of nobody's
    other_job = tmp_path / "other"
    keyfiles.make_keys(other_job, 2)
    foreign = keyfiles.worker_keys(other_job, 1)[:2]  # another job's worker 1
    ctx = zmq.Context()
    try:
        assert _ask(ctx, endpoint, keyfiles.worker_keys(job_keys, 1))  # the job's: answered
        assert not _ask(ctx, endpoint, (*stranger, server_public))
        assert not _ask(ctx, endpoint, (*foreign, server_public))
        assert _wait_for_count(port, 2) == 2
    finally:
        ctx.term()
    shards.stop()
    refused = [line for line in shards.log_text().splitlines() if "refused a connection" in line]
    for key in (stranger[0], foreign[0]):
        said = "refused a connection from 127.0.0.1: its CURVE key is not one of the job's"
        said += f" ({key.decode()})"
        assert sum(said in line for line in refused) == 1, refused


@pytest.mark.timeout(60)
def test_a_peer_trying_a_new_key_each_time_logs_a_few_lines(shards, job_keys):
    """The refused key is quoted in its line: were it part of the cause, a stranger trying a
    new key on each connection (no key of the job's needed) would write a line each."""
    (endpoint,) = shards.start(1, workers=2, keys=job_keys, extra=["--health-port", "0"])
    port = shard_probe_port(shards.log_text())
    server_public = keyfiles.worker_keys(job_keys, 0)[2]
    ctx = zmq.Context()
    try:
        for _ in range(TRIES):
            assert not _ask(ctx, endpoint, (*zmq.curve_keypair(), server_public), wait_ms=50)
        assert _wait_for_count(port, TRIES) == TRIES  # every one counted
    finally:
        ctx.term()
    shards.stop()
    refused = [line for line in shards.log_text().splitlines() if "refused a connection" in line]
    assert len(refused) <= REFUSALS_LOGGED + 2, refused  # in full, then the counts at 1 and 10
    assert any("10 more like this from 127.0.0.1" in line for line in refused), refused


@pytest.mark.timeout(60)
def test_a_peer_without_curve_or_with_another_server_key_is_logged_and_counted(
    shards, job_keys, tmp_path
):
    """Refused in the handshake, before any key reaches the ZAP handler: the shard's socket
    monitor tells them (their address is not known there). A peer that keeps reconnecting is
    logged a few times, then counted."""
    (endpoint,) = shards.start(1, workers=2, keys=job_keys, extra=["--health-port", "0"])
    port = shard_probe_port(shards.log_text())
    other_job = tmp_path / "other"
    keyfiles.make_keys(other_job, 2)
    wrong_server = (*keyfiles.worker_keys(job_keys, 1)[:2], keyfiles.worker_keys(other_job, 1)[2])
    ctx = zmq.Context()
    try:
        assert not _ask(ctx, endpoint, None)  # no CURVE: an --insecure worker
        assert not _ask(ctx, endpoint, wrong_server)  # the job's key, another job's server
        assert _wait_for_count(port, 2) >= 2
        assert _ask(ctx, endpoint, keyfiles.worker_keys(job_keys, 1))  # the job's still served
    finally:
        ctx.term()
    shards.stop()
    refused = [line for line in shards.log_text().splitlines() if "refused a connection" in line]
    # which side sees the mechanisms differ first is a race: the shard, or the peer closing
    causes = ("a security mechanism not the shard's", "its handshake ended early")
    mismatch = [line for line in refused if any(cause in line for cause in causes)]
    crypto = [line for line in refused if "its CURVE handshake failed" in line]
    assert mismatch and crypto, refused
    assert all("from an unknown address" in line for line in mismatch + crypto), refused
    assert len(mismatch) <= 2 * (5 + 3) and len(crypto) <= 5 + 3, refused  # in full, then counts


def _strangers(endpoint: str, server_public: bytes, stop: threading.Event) -> None:
    """Connect with a new key from a new address of 127/8 each time, until ``stop``: a stranger
    flooding from many addresses, each refused once."""
    port = endpoint.rsplit(":", 1)[1]
    ctx = zmq.Context()
    try:
        for i in range(250 * 250):
            if stop.is_set():
                return
            sock = ctx.socket(zmq.DEALER)
            sock.linger = 0
            sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
            sock.curve_serverkey = server_public
            sock.connect(f"tcp://127.{1 + i // 250}.{1 + i % 250}.2:0;127.0.0.1:{port}")
            time.sleep(0.01)
            sock.close(0)
    finally:
        ctx.term()


@pytest.mark.timeout(90)
def test_a_ranks_error_is_logged_while_strangers_flood_from_many_addresses(shards, job_keys):
    """Strangers' refusals from ever new addresses fill the lines in full of all peers; a
    worker's own mistake then went to that pool too, only counted. A key of the job's signs it:
    its pool is the ranks', and its first line is logged in full."""
    (endpoint,) = shards.start(1, workers=2, keys=job_keys, extra=["--health-port", "0"])
    port = shard_probe_port(shards.log_text())
    stop = threading.Event()
    flood = threading.Thread(
        target=_strangers, args=(endpoint, keyfiles.worker_keys(job_keys, 0)[2], stop)
    )
    flood.start()
    ctx = zmq.Context()
    rank = ctx.socket(zmq.DEALER)
    rank.linger = 0
    try:
        assert _wait_for_count(port, 2 * MOST_LOGGED) >= 2 * MOST_LOGGED  # the pool is spent
        keyfiles.curve_client(rank, keyfiles.worker_keys(job_keys, 1))
        rank.connect(f"tcp://{endpoint}")
        rank.send_multipart([b"\xc1not msgpack"])
        assert rank.poll(20_000), "the shard did not answer rank 1's bad request"
    finally:
        stop.set()
        flood.join(30)
        rank.close(0)
        ctx.term()
    shards.stop()
    lines = shards.log_text().splitlines()
    assert sum("refused a connection from 127." in line for line in lines) >= MOST_LOGGED, lines
    assert any("shard 0: bad request from 127.0.0.1 (rank 1's key)" in x for x in lines), lines
