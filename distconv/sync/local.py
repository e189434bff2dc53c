"""Single process: apply the optimizer the moment a gradient is complete."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distconv.optim import Optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncStrategy


class LocalSync(SyncStrategy):
    """Apply ``optimizer`` to each parameter as its gradient completes, then clear the gradient.

    Updating during backward is safe: a parameter fires only after every layer that uses it has
    finished with it, and layers below never read it.

    Attributes:
        state: optimizer state per parameter name (what checkpoints save).
    """

    def __init__(self, optimizer: Optimizer) -> None:
        self.optimizer = optimizer
        self.state: dict[str, dict[str, Any]] = {}

    def setup(self, params: Sequence[Parameter]) -> None:
        super().setup(params)
        for p in self.params:
            if p.name not in self.state:
                self.state[p.name] = self.optimizer.init_state(p.value)

    def on_gradient(self, param: Parameter) -> None:
        self.optimizer.update(param.value, param.grad, self.state[param.name])
        param.grad[...] = 0

    def finish_step(self) -> None:
        """Nothing is in flight in a single process."""
