"""The sync contract over one collective, an exchange of every rank's value: what the test
transports (ranks as threads, :mod:`tests.sync.threaded_sync`; ranks as processes,
:mod:`tests.sync.star_sync`) share.

Gradients are summed in rank order and divided by the step's global example count, and the
optimizer runs on every rank alike, so every rank ends each step with identical parameters.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from distconv.backend import copy_into
from distconv.optim import Optimizer
from distconv.parameter import Parameter
from distconv.sync.base import StateDict, SyncError, SyncStrategy
from distconv.sync.description import first_difference


class ExchangeSync(SyncStrategy):
    """A rank of a transport whose one collective is :meth:`exchange`."""

    def __init__(self, optimizer: Optimizer, rank: int, world_size: int) -> None:
        super().__init__(optimizer, rank, world_size)
        self.state: StateDict = {}
        self.fired: dict[str, Any] = {}

    @abstractmethod
    def exchange(self, value: Any) -> list[Any]:
        """Every rank's ``value``, in rank order."""

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
        values = self.exchange(([p.value for p in self.params], self.state))
        params, state = values[0]
        for p, v in zip(self.params, params):
            copy_into(p.value, v)
        self.load_state_dict(state)

    def all_equal(self, description: Mapping[str, Any]) -> None:
        for r, theirs in enumerate(self.exchange(dict(description))):
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
        shares = self.gradient_shares([self.fired[p.name] for p in self.params])
        total = sum(n for _, n in shares)
        for i, p in enumerate(self.params):
            summed = shares[0][0][i].copy()
            for g, _ in shares[1:]:  # rank order, so every rank adds in the same order
                summed += g[i]
            self.optimizer.update(p.value, summed / total, self.state[p.name])
        self.fired.clear()

    def gradient_shares(self, mine: list[np.ndarray]) -> list[tuple[list[np.ndarray], int]]:
        """Every rank's gradients of the step and its examples, in rank order."""
        return self.exchange((mine, self._examples))

    def allreduce_sum(self, values: Sequence[float]) -> list[float]:
        rows = self.exchange([float(v) for v in values])
        return [float(x) for x in np.sum(rows, axis=0)]
