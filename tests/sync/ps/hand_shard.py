"""An in-process shard whose requests a test hands over one by one (the loop ``Shard.serve``
runs, one request at a time), so the order of events is fixed, and a raw ZeroMQ client on it."""

from __future__ import annotations

import numpy as np
import zmq

from distconv.sync.ps import server
from distconv.sync.ps.config import ShardConfig
from distconv.sync.ps.server import Shard
from distconv.sync.ps.wire import pack, unpack_arrays, unpack_header

ROWS, BLOCKS = 1 << 15, 4  # dense parameter "w": 4 blocks of 256 KiB (float64)
TABLE_ROWS, TABLE_LEN = 2048, 40  # sparse parameter "t": one block of 640 KiB
PARAMS = [["w", [BLOCKS * ROWS], "float64", False], ["t", [TABLE_ROWS, TABLE_LEN], "float64", True]]


#: how long a request the shard handled may go unanswered before it counts as held
NO_REPLY_MS = 200


class HandShard:
    """A bound shard whose requests the test hands over one by one, a raw client on it, and
    every reply's frames as the shard passed them to ZeroMQ."""

    def __init__(self, monkeypatch, small_buffers: bool = False, **config) -> None:
        self.shard = Shard(ShardConfig(bind="127.0.0.1:0", insecure=True, **config))
        if small_buffers:  # with the client's queue full, a reply of 1 MiB cannot leave
            self.shard._sock.setsockopt(zmq.SNDBUF, 4096)
        endpoint = self.shard.bind()
        self.sent: list[tuple[list, bool]] = []  # every reply's frames, and whether copied
        real_send = server.send

        def record(sock, frames, prefix=(), track=False, copy=False):
            self.sent.append((frames, copy))
            return real_send(sock, frames, prefix=prefix, track=track, copy=copy)

        monkeypatch.setattr(server, "send", record)
        self.ctx = zmq.Context()
        self.client = self.ctx.socket(zmq.DEALER)
        self.client.linger = 0
        if small_buffers:  # one message in the queue, then the I/O thread stops reading
            self.client.setsockopt(zmq.RCVBUF, 4096)
            self.client.setsockopt(zmq.RCVHWM, 1)
        self.client.connect(f"tcp://{endpoint}")
        self.next_id = 0

    def send(self, head: dict, arrays=()) -> None:
        """Send a request and let the shard handle it; its reply is not read."""
        self.next_id += 1
        self.client.send_multipart(
            pack({"id": self.next_id, "job": "local", "rank": 0, **head}, list(arrays))
        )
        self.shard.handle(self.shard._sock.recv_multipart(copy=False))  # blocks: see timeout

    def read(self) -> tuple[dict, list[np.ndarray]]:
        frames = self.client.recv_multipart()
        header = unpack_header(frames[0], request=False)
        return header, unpack_arrays(header, frames[1:])

    def ask(self, head: dict, arrays=()) -> tuple[dict, list[np.ndarray]]:
        self.send(head, arrays)
        return self.read()

    def answer(self, head: dict) -> dict | None:
        """The reply header to ``head``, or None if the shard holds the request (a gather).
        The shard handled it before :meth:`send` returned, so a reply is already on its way
        over loopback: :data:`NO_REPLY_MS` of silence say it holds it."""
        self.send(head)
        return self.read()[0] if self.client.poll(NO_REPLY_MS) else None

    def seed(self, optimizer: str = "sgd") -> list[dict]:
        """Seed ``w`` (zeros) and ``t`` (row r holds r) in three parts of at most 640 KiB.
        Returns the replies to earlier requests that came before the seed's own (a held push
        that the seed drops)."""
        table = [[i, 0, i * ROWS, (i + 1) * ROWS] for i in range(BLOCKS)]
        table.append([BLOCKS, 1, 0, TABLE_ROWS])
        values = [np.zeros((ROWS, 1))] * BLOCKS
        values.append(
            np.repeat(np.arange(TABLE_ROWS, dtype=np.float64), TABLE_LEN).reshape(
                TABLE_ROWS, TABLE_LEN
            )
        )
        head = {"op": "seed", "params": PARAMS, "optimizer": {"name": optimizer, "lr": 1.0}}
        others = []
        for part, ids in enumerate([[0, 1], [2, 3], [4]]):
            self.send(
                {**head, "part": part, "parts": 3, "table": [table[i] for i in ids]},
                [values[i] for i in ids],
            )
            while (reply := self.read()[0])["id"] != self.next_id:
                others.append(reply)
            assert reply["op"] == "ok", reply
        return others

    def block_the_client(self) -> None:
        """Leave a reply unread in the client's queue (RCVHWM 1): the replies after it stay
        with ZeroMQ until the test reads, however long it waits (read it with :meth:`read`)."""
        self.send({"op": "pull", "blocks": [BLOCKS]})

    def close(self) -> None:
        self.client.close(0)
        self.ctx.term()
        self.shard.close()
