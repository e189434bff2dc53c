"""The worker's request/reply plumbing: one DEALER socket per shard, requests numbered and
sent without copying, replies matched to them by id, every wait bounded by a timeout."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import zmq

from distconv.sync.base import SyncError
from distconv.sync.ps import keys as keyfiles
from distconv.sync.ps.config import split_endpoint
from distconv.sync.ps.wire import WireError, pack, send, unpack_arrays, unpack_header

log = logging.getLogger("distconv.pserver")

#: a worker waits this much longer than ``timeout`` for a reply, so that the shard's own timeout
#: (which names the missing worker) fires first when both use the same value
GRACE = 1.5


class ShardChannel:
    """The request side of :class:`~distconv.sync.ps.client.PServerSync`: connect, send, wait
    for and receive the replies of the shards."""

    def _connect(self, endpoint: str, keys_dir: str | None, insecure: bool) -> zmq.Socket:
        sock = self._ctx.socket(zmq.DEALER)
        sock.linger = 0
        if insecure:
            log.warning("rank %d: --insecure: talking to %s without CURVE", self.rank, endpoint)
        else:
            keyfiles.curve_client(sock, keyfiles.worker_keys(keys_dir, self.rank))
        host, port = split_endpoint(endpoint)
        sock.connect(f"tcp://{f'[{host}]' if ':' in host else host}:{port}")
        return sock

    # -- requests -----------------------------------------------------------------------------
    def _send(self, shard: int, header: dict[str, Any], arrays: Sequence[np.ndarray] = ()) -> int:
        rid = self._next_id
        self._next_id += 1
        head = {**header, "id": rid, "job": self.job_id, "rank": self.rank}
        frames = pack(head, arrays)
        send(self._socks[shard], frames)
        self._bytes_pushed += sum(memoryview(f).nbytes for f in frames)
        return rid

    def _wait(self, rids: Sequence[int], what: str) -> list[tuple[dict[str, Any], list]]:
        """The replies to ``rids``, in order; SyncError on an error reply or past the timeout."""
        limit = self.timeout * GRACE
        deadline = _now() + limit
        missing = [r for r in rids if r not in self._replies]
        while missing:
            left = deadline - _now()
            if left <= 0:
                raise SyncError(
                    f"rank {self.rank}: no answer to {what} from pserver shard(s) "
                    f"{self._shards_of(missing)} within {limit:g} s"
                )
            for sock, _ in self._poller.poll(left * 1000):
                self._receive(sock)
            missing = [r for r in missing if r not in self._replies]
        out = [self._replies.pop(r) for r in rids]
        for r in rids:  # a long run sends millions of requests
            self._rid_shard.pop(r, None)
        for header, _ in out:
            if header["op"] == "error":
                raise SyncError(f"rank {self.rank}, {what}: pserver: {header.get('error')}")
        return out

    def _receive(self, sock: zmq.Socket) -> None:
        while True:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            self._bytes_pulled += sum(len(f) for f in frames)
            try:
                header = unpack_header(frames[0].buffer, request=False)
                arrays = unpack_arrays(header, [f.buffer for f in frames[1:]])
            except WireError as exc:
                raise SyncError(
                    f"rank {self.rank}: malformed reply from a pserver: {exc}"
                ) from None
            self._replies[header.get("id", -1)] = (header, arrays)

    def _shards_of(self, rids: Sequence[int]) -> str:
        shards = sorted({self._rid_shard.get(r, -1) for r in rids})
        return ", ".join(f"{s} ({self.endpoints[s]})" for s in shards if s >= 0) or "?"

    def _ask(self, shard: int, header: dict[str, Any], arrays: Sequence[np.ndarray] = ()):
        rid = self._send(shard, header, arrays)
        self._rid_shard[rid] = shard
        return rid

    def _ask_all(
        self, headers: Sequence[tuple[int, dict[str, Any], Sequence[np.ndarray]]], what: str
    ) -> list[tuple[dict[str, Any], list]]:
        return self._wait([self._ask(s, h, a) for s, h, a in headers], what)


def _now() -> float:
    return time.monotonic()
