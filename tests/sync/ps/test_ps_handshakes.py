"""A worker whose connection a shard refuses at the handshake stops at once, naming the shard
and the cause, and closes without hanging: real shards, real CURVE keys.

Before, a ``--insecure`` worker against a CURVE shard, or a worker whose key the shard's ZAP
handler refused, waited out its whole timeout and then hung for good sending its ``bye``:
ZeroMQ drops such a connection without a queue, and a send to it blocks.
"""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

import pytest
import zmq
from ps_helpers import small_net

from distconv.optim import create_optimizer
from distconv.sync import SyncError
from distconv.sync.ps import channel
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.handshakes import HandshakeWatch, monitor_of
from distconv.sync.ps.keys import make_keys

#: long enough that a refusal seen only at the timeout fails the test's time bound
TIMEOUT = 30.0


def _worker(endpoints, **kw) -> PServerSync:
    return PServerSync(create_optimizer("sgd"), rank=0, world_size=1, pservers=endpoints, **kw)


def _stranger_keys(tmp_path: Path, job_keys: str) -> str:
    """A key directory with the job's server key and a worker key of another job."""
    make_keys(tmp_path / "other", workers=1)
    keys = tmp_path / "stranger"
    keys.mkdir()
    (keys / "server.key").write_bytes((Path(job_keys) / "server.key").read_bytes())
    for name in ("worker-0.key", "worker-0.key_secret"):
        shutil.copy2(tmp_path / "other" / name, keys / name)  # its mode too: a secret's 0600
    return str(keys)


def _refused(sync: PServerSync, match: str) -> float:
    """Seconds from ``setup`` to the refusal and a closed worker."""
    start = time.monotonic()
    try:
        with pytest.raises(SyncError, match=match):
            sync.setup(small_net().parameters())
    finally:
        sync.close()
    return time.monotonic() - start


@pytest.mark.timeout(30)
def test_an_insecure_worker_against_a_curve_shard_is_told_at_once(shards, job_keys):
    endpoints = shards.start(1, workers=1, keys=job_keys)
    took = _refused(
        _worker(endpoints, insecure=True, timeout=TIMEOUT),
        r"pserver shard 0 \(127\.0\.0\.1:\d+\) refused this worker's connection: this worker "
        r"runs --insecure and the shard CURVE",
    )
    assert took < 10


@pytest.mark.timeout(30)
def test_a_curve_worker_against_an_insecure_shard_is_told_at_once(shards, job_keys):
    endpoints = shards.start(1, workers=1)
    took = _refused(
        _worker(endpoints, keys_dir=job_keys, timeout=TIMEOUT),
        "refused this worker's connection: this worker runs CURVE and the shard --insecure",
    )
    assert took < 10


@pytest.mark.timeout(30)
def test_a_worker_key_the_shard_does_not_know_is_told_at_once(shards, job_keys, tmp_path):
    """The job's server key, but a worker key of another job: the shard's ZAP handler says
    no (status 400), and ZeroMQ drops the connection for good."""
    endpoints = shards.start(1, workers=1, keys=job_keys)
    took = _refused(
        _worker(endpoints, keys_dir=_stranger_keys(tmp_path, job_keys), timeout=TIMEOUT),
        r"refused this worker's connection: the shard does not know this worker's key "
        r"\(its ZAP handler answered 400\)",
    )
    assert took < 10


@pytest.mark.timeout(30)
def test_another_jobs_server_key_is_named_when_the_hello_times_out(shards, job_keys, tmp_path):
    """The shard cannot read a hello made for another server key and drops it; ZeroMQ tries
    again and again, so only the timeout ends the wait, and its message says why."""
    make_keys(tmp_path / "other", workers=1)
    endpoints = shards.start(1, workers=1, keys=job_keys)
    _refused(
        _worker(endpoints, keys_dir=str(tmp_path / "other"), timeout=1.0),
        r"no answer to hello from pserver shard\(s\) 0 .* within 1\.5 s "
        r"\(1\.5 x --timeout 1 s\); the connection's "
        r"handshake failed \d+ time\(s\): is server.key in --keys the key of this job's shards",
    )


@pytest.mark.timeout(30)
def test_a_send_into_a_dropped_connection_fails_naming_the_shard(shards, job_keys, tmp_path):
    """Past a handshake the shard's ZAP handler refused, a request cannot be queued anywhere:
    the send gives up after the wait's limit (1.5 x timeout) instead of blocking for good.
    (ZeroMQ takes the connection's queue away a moment after the refusal, so a send or two
    may still be queued, and dropped.)"""
    endpoints = shards.start(1, workers=1, keys=job_keys)
    sync = _worker(endpoints, keys_dir=_stranger_keys(tmp_path, job_keys), timeout=0.4)
    try:
        with pytest.raises(SyncError, match="refused this worker's connection"):
            sync.setup(small_net().parameters())
        start = time.monotonic()
        with pytest.raises(SyncError, match=r"pserver shard 0 .* took no message for 0\.6 s"):
            while time.monotonic() - start < 5:
                sync._send(0, {"op": "stats"})
                time.sleep(0.05)
        assert time.monotonic() - start < 5
    finally:
        sync.close()
    assert "listening" in shards.log_text()  # the shard itself is untroubled


@pytest.mark.timeout(30)
def test_a_refusal_before_the_worker_reads_its_monitors_is_not_lost(shards, job_keys, monkeypatch):
    """ZeroMQ reports a failed handshake only to a monitor that exists at that moment. The
    monitors were started after the sockets connected, so a shard that refused before then (a
    loaded machine, or the key files of the next shards being read) went unreported and the
    worker waited out its whole timeout (seen: this file's first test, flaky under load)."""
    endpoints = shards.start(1, workers=1, keys=job_keys)
    real = channel.HandshakeWatch

    def late(*args, **kwargs):
        time.sleep(1.0)  # the shard refuses the handshake meanwhile
        return real(*args, **kwargs)

    monkeypatch.setattr(channel, "HandshakeWatch", late)
    took = _refused(
        _worker(endpoints, insecure=True, timeout=TIMEOUT),
        "this worker runs --insecure and the shard CURVE",
    )
    assert took < 10


def _read_until(watch: HandshakeWatch, poller: zmq.Poller, done, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        poller.poll(100)
        assert watch.refusal(watch.monitor(0)) is None
    assert done()


@pytest.mark.timeout(30)
def test_a_handshake_cut_short_then_one_that_succeeds_is_no_hint():
    """A handshake cut short (a shard restarting, a brief outage) counts towards the timeout's
    hint that server.key may be another job's; one that then succeeds shows the key is right,
    and a later timeout (a slow rank, a lost one) must not send the user to check it."""
    listener = socket.socket()
    # the closed connection lingers on the port (its accepted socket inherits this): ZeroMQ's
    # listener, with SO_REUSEADDR too, may then bind it
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    router = ctx.socket(zmq.ROUTER)
    router.linger = 0
    monitor_of(sock)
    sock.connect(f"tcp://127.0.0.1:{port}")
    poller = zmq.Poller()
    watch = HandshakeWatch([sock], poller, insecure=True)
    try:
        conn, _ = listener.accept()  # not ZeroMQ: the handshake is cut short
        conn.close()
        _read_until(watch, poller, lambda: watch.unexplained[0] > 0)
        assert "handshake failed" in watch.hint([0])
        listener.close()
        for _ in range(50):  # the shard is back, the same keys
            try:
                router.bind(f"tcp://127.0.0.1:{port}")
                break
            except zmq.ZMQError:  # the port not free yet
                time.sleep(0.1)
        sock.send(b"hello")
        assert router.poll(10_000), "the worker never reached the restarted shard"
        _read_until(watch, poller, lambda: watch.hint([0]) == "")
    finally:
        listener.close()
        watch.close()
        sock.close()
        router.close()
        ctx.term()
