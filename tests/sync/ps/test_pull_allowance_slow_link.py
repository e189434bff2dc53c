"""A live shard's large replies crossing a slow link are waited for.

ZeroMQ hands a reply over only once all of it arrived, so a shard sending a pull of the whole
model, or a checkpoint's optimizer state, is silent to the worker while the bytes cross. Such a
shard is heard from while its bytes arrive (it was once allowed a fixed time per byte
instead). Here the link really is slow: a proxy (:class:`SlowLink`) carries the
shard's bytes to each worker at :data:`RATE`, so a reply takes seconds to cross while the
silence allowed (:data:`SILENCE`) is under half of one. That silence must also cover the shard's
own work before its first byte (0.12 s for the state's, but 0.3 to 0.8 s with the CPUs busy, as
the suite's other workers keep them: 0.3 s was exceeded), so it is that work's five
times, and the crossing twice the silence. Each test runs twice: with
the link's bytes read (Linux), and without (the allowance per byte, elsewhere). Real shards.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import numpy as np
import pytest
from ps_helpers import batches, insecure_worker, run_ranks, small_net, train_steps

from distconv.endpoint import split_endpoint
from distconv.stop_request import StopRequest
from distconv.sync.ps import channel
from distconv.sync.ps.handshakes import HandshakeWatch

HIDDEN = 200_000  # fc1 of 200000 x 12 float64, fc2 4 x 200000: about 27 MB, Adam's state twice
BLOCK_BYTES = 8 << 20
RATE = 20e6  # bytes/s from the shard to each worker: 27 MB take ~1.4 s, 54 MB ~2.7 s
#: the silence each test allows a shard (its timeout this over GRACE): see the docstring
SILENCE = 0.6
CHUNK = 1 << 16


class SlowLink:
    """A TCP proxy on 127.0.0.1 port 0 (:attr:`endpoint`) to the shard at ``target``, each of
    whose connections carries the shard's bytes at ``rate`` bytes/s, the worker's at
    ``up_rate`` (0: at once)."""

    def __init__(self, target: str, rate: float, up_rate: float = 0.0) -> None:
        self._target = split_endpoint(target)
        self._rate, self._up_rate = rate, up_rate
        self._server = socket.create_server(("127.0.0.1", 0))
        self._socks: list[socket.socket] = [self._server]
        self.endpoint = f"127.0.0.1:{self._server.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                worker, _ = self._server.accept()
            except OSError:  # closed
                return
            shard = socket.create_connection(self._target)
            self._socks += [worker, shard]
            threading.Thread(
                target=self._pump, args=(worker, shard, self._up_rate), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(shard, worker, self._rate), daemon=True
            ).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, rate: float) -> None:
        try:
            while chunk := src.recv(CHUNK):
                dst.sendall(chunk)
                if rate:
                    time.sleep(len(chunk) / rate)
        except OSError:
            pass
        for sock in (src, dst):  # one side gone: the other goes too, as a TCP link would
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        for sock in self._socks:
            sock.close()


@pytest.fixture(params=["bytes read", "bytes not read"])
def slow_shard(request, shards, monkeypatch):
    """One async shard for ``workers`` ranks, behind a :class:`SlowLink` (with ``up``, slow
    both ways): a factory. The
    shard is heard from by the bytes on its link (no time per byte), or, where those cannot
    be read, by the time its replies' bytes take at ``SLOW_LINK_BYTES``."""
    if request.param == "bytes read":
        if not socket.__dict__.get("TCP_INFO"):
            pytest.skip("a link's bytes are read with Linux's TCP_INFO")
        monkeypatch.setattr(channel, "SLOW_LINK_BYTES", 1e30)  # all but no time per byte
    else:
        monkeypatch.setattr(HandshakeWatch, "idle", lambda self, shard: None)
    links: list[SlowLink] = []

    def start(workers: int, up: bool = False) -> str:
        (endpoint,) = shards.start(1, workers=workers, mode="async")
        links.append(SlowLink(endpoint, RATE, RATE if up else 0.0))
        return links[-1].endpoint

    yield start
    for link in links:
        link.close()


@pytest.mark.timeout(120)
def test_a_stopping_rank_waits_for_a_live_shard_s_large_pull(slow_shard, monkeypatch):
    endpoint = slow_shard(2)
    nets = [small_net(seed=r, hidden=HIDDEN) for r in range(2)]
    syncs = [insecure_worker([endpoint], r, 2, block_bytes=BLOCK_BYTES) for r in range(2)]
    request = StopRequest(announce=False)
    restore = None
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
        run_ranks(lambda r: train_steps(nets[r], syncs[r], batches(1, 8), r, 2), 2)
        monkeypatch.setattr(channel, "STOP_PATIENCE", SILENCE)  # under half the pull's ~1.4 s
        for s in syncs:  # as a worker whose waits were short (its replies small or staggered)
            s._usual_quiet = 0.0
        # the rank that pushed first holds values without the other's update: they differ
        assert not np.array_equal(nets[0].parameters()[4].value, nets[1].parameters()[4].value)
        restore = request.install()
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while not request.received and time.monotonic() < deadline:
            time.sleep(0.01)
        run_ranks(lambda r: syncs[r].refresh_parameters(), 2)
    finally:
        if restore is not None:
            restore()
        for s in syncs:
            s.close()
    for p, q in zip(nets[0].parameters(), nets[1].parameters()):  # both pulled the shard's
        np.testing.assert_array_equal(p.value, q.value, err_msg=p.name)


@pytest.mark.timeout(120)
def test_a_large_state_is_gathered_from_a_live_shard(slow_shard, monkeypatch):
    endpoint = slow_shard(1)
    net = small_net(hidden=HIDDEN)
    sync = insecure_worker([endpoint], optimizer="adam", lr=1e-3, block_bytes=BLOCK_BYTES)
    try:
        sync.setup(net.parameters())
        train_steps(net, sync, batches(1, 8))
        monkeypatch.setattr(sync, "timeout", SILENCE / channel.GRACE)  # not the state's ~2.7 s
        state = sync.state_dict()
    finally:
        sync.close()
    fc1 = state["fc1.weight"]
    assert float(fc1["step"]) == 1.0, fc1["step"]
    assert fc1["m"].shape == (HIDDEN, 12) and np.count_nonzero(fc1["m"]) > 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("slow_shard", ["bytes read"], indirect=True)  # a push's has no other
def test_a_step_waits_for_a_live_shard_s_large_push_replies(slow_shard, monkeypatch):
    endpoint = slow_shard(1)
    net = small_net(hidden=HIDDEN)
    sync = insecure_worker([endpoint], block_bytes=BLOCK_BYTES)
    try:
        sync.setup(net.parameters())
        before = net.parameters()[0].value.copy()
        monkeypatch.setattr(sync, "timeout", SILENCE / channel.GRACE)  # not the values' ~1.4 s
        train_steps(net, sync, batches(1, 8))  # each push's reply: its blocks' new values
    finally:
        sync.close()
    assert not np.array_equal(net.parameters()[0].value, before)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("slow_shard", ["bytes read"], indirect=True)  # a seed's has no other
def test_a_seed_and_pushes_crossing_a_slow_link_are_waited_for(slow_shard):
    endpoint = slow_shard(1, up=True)
    net = small_net(hidden=HIDDEN)
    # SILENCE allowed, not the ~1.4 s the seed's (or a step's pushes') ~27 MB take
    sync = insecure_worker([endpoint], block_bytes=BLOCK_BYTES, timeout=SILENCE / channel.GRACE)
    try:
        sync.setup(net.parameters())
        before = net.parameters()[0].value.copy()
        train_steps(net, sync, batches(1, 8))
    finally:
        sync.close()
    assert not np.array_equal(net.parameters()[0].value, before)
