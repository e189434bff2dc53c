"""A test fixture, not a product feature: N ranks as N threads of one process.

:class:`ThreadedSync` implements the whole sync contract with a shared "world" object: ranks
meet at a barrier, sum gradients in rank order, divide by the step's global example count and run
the optimizer locally, so every rank ends each step with identical parameters. It is what an
allreduce transport does, without the transport, which makes the Trainer's distributed logic
(global batch, accumulation, metric reduction, start-up) testable against single-process
training in float64.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from distconv.backend import copy_into
from distconv.optim import Optimizer
from distconv.parameter import Parameter
from distconv.sync.base import StateDict, SyncError, SyncStrategy
from distconv.sync.description import first_difference


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


class ThreadedSync(SyncStrategy):
    """Rank ``rank`` of a :class:`World` of threads."""

    def __init__(self, optimizer: Optimizer, world: World, rank: int) -> None:
        super().__init__(optimizer, rank, world.size)
        self.world = world
        self.state: StateDict = {}
        self.fired: dict[str, Any] = {}

    def init_state(self) -> None:
        for p in self.params:
            self.state.setdefault(p.name, self.optimizer.init_state(p.value))

    def load_state_dict(self, state: Mapping[str, Mapping[str, Any]]) -> None:
        for name, buffers in state.items():
            for key, value in buffers.items():
                copy_into(self.state[name][key], value)

    def state_dict(self) -> StateDict:
        return self.state

    def broadcast_parameters(self) -> None:
        values = self.world.exchange(self.rank, ([p.value for p in self.params], self.state))
        params, state = values[0]
        for p, v in zip(self.params, params):
            copy_into(p.value, v)
        self.load_state_dict(state)

    def all_equal(self, description: Mapping[str, Any]) -> None:
        for r, theirs in enumerate(self.world.exchange(self.rank, dict(description))):
            diff = first_difference(description, theirs)
            if diff:
                raise SyncError(f"rank {self.rank} and rank {r} differ: {diff}")

    def on_gradient(self, param: Parameter) -> None:
        """Take the gradient as a transport would: now, once; later changes must not count."""
        if param.name in self.fired:
            raise SyncError(f"rank {self.rank}: {param.name} fired twice in one step")
        self.fired[param.name] = param.grad.copy()
        param.grad[...] = 0

    def finish_step(self) -> None:
        missing = [p.name for p in self.params if p.name not in self.fired]
        if missing:
            raise SyncError(f"rank {self.rank}: {missing} never fired this step")
        mine = [self.fired[p.name] for p in self.params]
        grads = self.world.exchange(self.rank, (mine, self._examples))
        total = sum(n for _, n in grads)
        for i, p in enumerate(self.params):
            summed = grads[0][0][i].copy()
            for g, _ in grads[1:]:  # rank order, so every rank adds in the same order
                summed += g[i]
            self.optimizer.update(p.value, summed / total, self.state[p.name])
        self.fired.clear()

    def allreduce_sum(self, values: Sequence[float]) -> list[float]:
        rows = self.world.exchange(self.rank, [float(v) for v in values])
        return [float(x) for x in np.sum(rows, axis=0)]

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
