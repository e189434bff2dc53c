"""A sync strategy of one's own through :func:`distconv.distributed.init`: made by a callable
from the optimizer init builds (``sync=MySync``, ``sync=lambda opt: MySync(opt, 1.0)``), then
checked against the runtime as init checks the transports it builds by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distconv.optim import Optimizer
from distconv.runtime import Runtime, RuntimeConfigError
from distconv.script_main import mpi_launcher_size
from distconv.sync import SyncStrategy

#: what makes a strategy of one's own from the optimizer: its class, or a function
SyncFactory = Callable[[Optimizer], SyncStrategy]


def named(factory: Callable[..., Any]) -> str:
    """A callable as a reader knows it: a class's or function's qualified name (a lambda's
    ends in ``<lambda>``), else its type and repr (a ``functools.partial``)."""
    return getattr(factory, "__qualname__", None) or f"{type(factory).__name__} {factory!r:.60}"


def build_own_sync(factory: SyncFactory, optimizer: Optimizer, runtime: Runtime) -> SyncStrategy:
    """The strategy ``factory`` makes from ``optimizer``, checked against ``runtime`` as
    :func:`~distconv.distributed.build_sync` checks a transport's, and closed before a
    refusal propagates.

    Raises:
        TypeError: ``factory`` returned no :class:`SyncStrategy`, or one whose base
            ``__init__`` never ran (a ``@dataclass`` one's: it has no rank to compare).
        RuntimeConfigError: its rank and world size disagree with the runtime's.
    """
    strategy = factory(optimizer)
    if not isinstance(strategy, SyncStrategy):
        # left open: what close() means to a thing that is no strategy (the optimizer, a
        # socket its maker keeps) is not init's to guess, and the error names it
        raise TypeError(
            f"init: sync={named(factory)} returned {type(strategy).__name__} "
            f"{strategy!r:.60}, not a SyncStrategy: it makes the strategy from the optimizer "
            "(sync=MySync, or sync=lambda opt: MySync(opt, ...))"
        )
    strategy.check_made()  # its own close refuses alike: nothing of the base to close
    disagreement = _own_disagrees(strategy, runtime)
    if disagreement is not None:
        try:  # closed while it propagates, as the mpi sync that disagrees is
            raise RuntimeConfigError(disagreement)
        finally:
            strategy.close()
    return strategy


def _own_disagrees(strategy: SyncStrategy, runtime: Runtime) -> str | None:
    """Why a strategy of one's own does not fit this process, in the words of the transports'
    refusals, or None: its rank and size are not those flags or the environment give (a
    LocalSync subclass under ``mpiexec -n 2`` trained alone on each rank, every one writing as
    the chief), or it trains alone where an MPI launcher started several ranks."""
    says = f"{type(strategy).__name__} says rank {strategy.rank} of {strategy.world_size}"
    alone = (
        "; it trains alone: start one process (without mpiexec or a launcher's workers), or "
        "make a strategy of several ranks (docs/architecture.md, 'A strategy of your own')"
    )
    if runtime.source != "default" and (
        (strategy.rank, strategy.world_size) != (runtime.rank, runtime.world_size)
    ):
        env = f"the environment ({runtime.source}) says rank {runtime.rank} of {runtime.world_size}"
        way = alone if strategy.world_size == 1 else (
            "; make it for this process's rank and world size (distconv.runtime."
            "detect_runtime(flags) reads them as init does)"
        )  # fmt: skip
        return f"{says}, but {env}{way}"
    if strategy.world_size == 1 and mpi_launcher_size() > 1:
        launcher = f"an MPI launcher started this process as one of {mpi_launcher_size()} ranks"
        return f"{launcher}, but {says}{alone}"
    return None
