"""A test fixture, not a product feature: ranks as processes, meeting over TCP on 127.0.0.1.

:class:`StarSync` is :class:`~tests.sync.exchange_sync.ExchangeSync` over real sockets: rank 0
listens on port 0 and writes its address into a file every rank is given (``meeting``); the
others connect and say their rank. Each exchange goes through rank 0, which sends every rank
all the values in rank order. It is a transport of one's own as the docs describe one, made to
be built in each rank's process by ``functools.partial(StarSync, meeting=path)``; its
subclasses below are the faults the equivalence check exists to catch, each training on
without a word (the last three only after a restart: the check's ``RESUMED_JOB``).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Mapping
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any

import numpy as np

from distconv.optim import Optimizer
from tests.sync.exchange_sync import ExchangeSync


class StarSync(ExchangeSync):
    """Rank ``rank`` of ``world_size``, meeting the others through the file ``meeting``
    (within ``timeout`` seconds)."""

    def __init__(
        self,
        optimizer: Optimizer,
        rank: int,
        world_size: int,
        *,
        meeting: str | os.PathLike,
        timeout: float = 30.0,
    ) -> None:
        super().__init__(optimizer, rank, world_size)
        self.peers: list[Connection] = []
        meeting = Path(meeting)
        if rank == 0:
            with Listener(("127.0.0.1", 0)) as listener:
                written = meeting.with_suffix(".part")
                written.write_text("{} {}".format(*listener.address))
                written.replace(meeting)  # whole, or not there: a reader never sees half of it
                joined = [listener.accept() for _ in range(world_size - 1)]
            self.peers = sorted(joined, key=lambda c: c.recv())  # each says its rank first
        elif world_size > 1:
            self.peers = [_join(meeting, rank, time.monotonic() + timeout, timeout)]
            self.peers[0].send(rank)

    def exchange(self, value: Any) -> list[Any]:
        if self.world_size == 1:
            return [value]
        if self.rank != 0:
            self.peers[0].send(value)
            return self.peers[0].recv()
        values = [value] + [peer.recv() for peer in self.peers]
        for peer in self.peers:
            peer.send(values)
        return values

    def barrier(self) -> None:
        self.exchange(None)

    def close(self) -> None:
        for peer in self.peers:
            peer.close()
        self.peers = []


def _join(meeting: Path, rank: int, deadline: float, timeout: float) -> Connection:
    """A connection to rank 0 at the address in ``meeting``, read again until one is taken: a
    file left by an earlier job (the same ``meeting`` for another call) names a listener gone,
    refused, until rank 0 writes its own."""
    while True:
        try:
            host, port = meeting.read_text().split()
            return Client((host, int(port)))
        except (FileNotFoundError, ConnectionRefusedError):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"rank {rank}: no rank 0 listening at {meeting}'s address in {timeout} s"
                ) from None
            time.sleep(0.02)


class OwnExamplesSync(StarSync):
    """Takes the step's example count for its own times the world size, not the sum of every
    rank's: right while every rank brings as many, wrong in an uneven last step."""

    def gradient_shares(self, mine: list[np.ndarray]) -> list[tuple[list[np.ndarray], int]]:
        shares = super().gradient_shares(mine)
        return [(g, self._examples) for g, _ in shares]  # as many as this rank's, each


class NoBroadcastSync(StarSync):
    """Broadcasts nothing at setup: each rank trains on from the weights it drew."""

    def broadcast_parameters(self) -> None:
        pass


class ForgetfulSync(StarSync):
    """Sums every rank's gradients but the last's (its examples still counted)."""

    def gradient_shares(self, mine: list[np.ndarray]) -> list[tuple[list[np.ndarray], int]]:
        shares = super().gradient_shares(mine)
        last, examples = shares[-1]
        return [*shares[:-1], ([np.zeros_like(g) for g in last], examples)]


class NoLrScaleSync(StarSync):
    """Leaves the learning rate as it was made: a schedule's scale never reaches the
    optimizer."""

    def set_lr_scale(self, factor: float) -> None:
        pass


class LocalMeanSync(StarSync):
    """Exchanges each rank's mean gradient and weighs it by the rank's examples: right while
    every rank has examples in a step, NaN where one has none (0 / 0)."""

    def gradient_shares(self, mine: list[np.ndarray]) -> list[tuple[list[np.ndarray], int]]:
        with np.errstate(invalid="ignore", divide="ignore"):
            means = [g / self._examples for g in mine]
        shares = super().gradient_shares(means)
        return [([m * n for m in g], n) for g, n in shares]


class ChiefOnlyStateSync(StarSync):
    """Takes the optimizer state it is given on rank 0 alone: a resumed rank 0 holds the
    checkpoint's (the chief loads it), the others keep the zeros they started with."""

    def load_state_dict(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        if self.rank == 0:
            super().load_state_dict(state)


class DropsStateSync(StarSync):
    """Takes no optimizer state at all: a resumed job starts Adam over on every rank."""

    def load_state_dict(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        pass


class NoStepCountSync(StarSync):
    """Takes Adam's moments but not its step count: a resumed job's bias correction starts
    over, as in its first step."""

    def load_state_dict(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        moments = {name: {k: v for k, v in b.items() if k != "step"} for name, b in state.items()}
        super().load_state_dict(moments)


def star(kind: type[StarSync], meeting: Path) -> functools.partial:
    """``make_sync`` for :func:`distconv.equivalence.assert_matches_local`: ``kind`` ranks
    meeting through the file ``meeting``."""
    return functools.partial(kind, meeting=meeting)
