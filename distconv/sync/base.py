"""The interface every gradient-synchronisation strategy implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from distconv.parameter import Parameter


class SyncStrategy(ABC):
    """What happens to a parameter once its gradient is complete.

    The trainer calls :meth:`setup` once with every parameter, :meth:`start_step` before each
    forward (a parameter-server client pulls there), passes the strategy itself as the backward
    callback (it is callable), and calls :meth:`finish_step` after backward, which returns once
    every parameter holds its updated value.
    """

    def setup(self, params: Sequence[Parameter]) -> None:
        """Called once, before the first step, with every trainable parameter."""
        self.params = list(params)

    def start_step(self) -> None:
        """Called before each forward pass."""

    @abstractmethod
    def on_gradient(self, param: Parameter) -> None:
        """The ``inc_update`` callback: ``param.grad`` is complete for this step."""

    def __call__(self, param: Parameter) -> None:
        self.on_gradient(param)

    @abstractmethod
    def finish_step(self) -> None:
        """Wait for what is in flight; afterwards every parameter is updated."""

    def close(self) -> None:
        """Release sockets, communicators and threads."""
