"""A test fixture, not a product feature: N ranks as N threads of one process.

:class:`ThreadedSync` implements the whole sync contract with a shared "world" object: ranks
meet at a barrier and exchange what :class:`~tests.sync.exchange_sync.ExchangeSync` sums in rank
order, so every rank ends each step with identical parameters. It is what an
allreduce transport does, without the transport, which makes the Trainer's distributed logic
(global batch, accumulation, metric reduction, start-up) testable against single-process
training in float64.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from distconv.optim import Optimizer
from tests.sync.exchange_sync import ExchangeSync


class World:
    """What the ranks share: a barrier, one slot per rank for each exchange, and a turn.

    Only the rank holding the turn computes; a rank gives it up while it waits for the others.
    Ranks in one process would otherwise call BLAS from several threads at once, which this
    fixture has no business testing (real ranks are processes), and which made results flaky.
    """

    def __init__(self, size: int, timeout: float = 30.0) -> None:
        self.size = size
        self._barrier = threading.Barrier(size, timeout=timeout)
        self.turn = threading.Lock()
        self.slots: list[Any] = [None] * size

    def wait(self) -> None:
        """Wait for every rank, without holding the turn meanwhile."""
        self.turn.release()
        try:
            self._barrier.wait()
        finally:
            self.turn.acquire()

    def exchange(self, rank: int, value: Any) -> list[Any]:
        """Every rank's ``value``, in rank order."""
        self.wait()
        self.slots[rank] = value
        self.wait()
        values = list(self.slots)
        self.wait()
        return values

    def abort(self) -> None:
        self._barrier.abort()


class ThreadedSync(ExchangeSync):
    """Rank ``rank`` of a :class:`World` of threads."""

    def __init__(self, optimizer: Optimizer, world: World, rank: int) -> None:
        super().__init__(optimizer, rank, world.size)
        self.world = world

    def exchange(self, value: Any) -> list[Any]:
        return self.world.exchange(self.rank, value)

    def barrier(self) -> None:
        self.world.wait()


def run_ranks(size: int, body: Callable[[int, World], Any]) -> list[Any]:
    """Run ``body(rank, world)`` on ``size`` threads; returns the results in rank order."""
    world = World(size)
    results: list[Any] = [None] * size
    errors: list[BaseException] = []

    def run(rank: int) -> None:
        world.turn.acquire()
        try:
            results[rank] = body(rank, world)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)
            world.abort()
        finally:
            world.turn.release()

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    hung = [r for r, t in enumerate(threads) if t.is_alive()]
    assert not hung, f"rank(s) {hung} still running after 60 s"
    return results
