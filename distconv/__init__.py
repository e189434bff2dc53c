"""distconv: a hackable data-parallel training framework.

Layers run forward and ``backward(callback)`` on NCHW arrays (numpy on the CPU, cupy on a GPU);
each parameter calls ``inc_update(callback)`` the moment its gradient is complete, which is the
seam where a sync strategy (local optimizer, parameter server, allreduce) takes over.

The errors a documented call raises are caught from here, whichever module defines them:
``except distconv.DataError``, ``from distconv import CheckpointError, Preempted``
(:data:`__all__` lists them; each loads its module when first asked for).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and editors see; at run time, __getattr__ below
    from types import ModuleType

    from distconv.arg import Arg
    from distconv.backend import BackendError
    from distconv.build_identity import build_id
    from distconv.checkpoint_errors import (
        CheckpointDamaged,
        CheckpointError,
        CheckpointReadError,
        CheckpointVersionError,
    )
    from distconv.data import DataError
    from distconv.layers.errors import LayerError
    from distconv.network import Network, NetworkError
    from distconv.optim_base import OptimizerConfigError
    from distconv.parameter import Parameter
    from distconv.placement import RuntimeConfigError
    from distconv.step_guard import TrainingError
    from distconv.stop_request import Preempted
    from distconv.sync.errors import JobRefused, SyncError
    from distconv.trainer import Trainer

# Imported on first use (PEP 562): the trainer pulls in data loading, metrics and the sync
# strategies, which a process that only builds layers, or a shard, has no need of; and no
# name here imports numpy with the package, which every `distconv.*` import runs first:
# `distconv-launch` (distconv.launch) takes its stop signals only after it (launcher.interrupt)
_LAZY = {
    "Arg": "distconv.arg",
    "Network": "distconv.network",
    "Parameter": "distconv.parameter",
    "Trainer": "distconv.trainer",
    "build_id": "distconv.build_identity",
}

#: the errors a documented call raises, each caught from here (``except distconv.DataError``),
#: whichever module defines it; loaded on first use as the names above (catching SyncError or a
#: checkpoint's errors loads no numpy)
_ERRORS = {
    "BackendError": "distconv.backend",
    "CheckpointDamaged": "distconv.checkpoint_errors",
    "CheckpointError": "distconv.checkpoint_errors",
    "CheckpointReadError": "distconv.checkpoint_errors",
    "CheckpointVersionError": "distconv.checkpoint_errors",
    "DataError": "distconv.data",
    "JobRefused": "distconv.sync.errors",
    "LayerError": "distconv.layers.errors",
    "NetworkError": "distconv.network",
    "OptimizerConfigError": "distconv.optim_base",
    "Preempted": "distconv.stop_request",
    "RuntimeConfigError": "distconv.placement",
    "SyncError": "distconv.sync.errors",
    "TrainingError": "distconv.step_guard",
}
_LAZY.update(_ERRORS)

# spelled out, not built from the dicts: a checker reads a literal list only
__all__ = [
    "Arg",
    "Network",
    "Parameter",
    "Trainer",
    "build_id",
    "BackendError",
    "CheckpointDamaged",
    "CheckpointError",
    "CheckpointReadError",
    "CheckpointVersionError",
    "DataError",
    "JobRefused",
    "LayerError",
    "NetworkError",
    "OptimizerConfigError",
    "Preempted",
    "RuntimeConfigError",
    "SyncError",
    "TrainingError",
]
__version__ = "0.1.0"

# at run time only: a checker that saw ``__getattr__ -> Any`` took every misspelled name
# (``from distconv import Netwrk``) as Any, so a typo passed ``mypy --strict``
if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        if name in _LAZY:
            return getattr(importlib.import_module(_LAZY[name]), name)
        # a module of the package, imported now: an annotation names a type its module imports
        # only for checkers through it (``distconv.service.ServiceEndpoints``), and
        # typing.get_type_hints, evaluating that, found no ``distconv.service`` not yet imported
        if (module := _submodule(__name__, name)) is not None:
            return module
        raise AttributeError(f"module 'distconv' has no attribute {name!r}")


def _submodule(package: str, name: str) -> ModuleType | None:
    """The module ``package.name``, imported now, or None where ``name`` names none: a public
    name alone. ``hasattr(distconv, "__main__")`` ran the command line and exited, and
    ``__pycache__`` came back as a namespace package; a dotted name's look imported its parent
    and raised ModuleNotFoundError, which ``getattr(package, "a.b", None)`` does not catch."""
    if not name.isidentifier() or name.startswith("_"):
        return None
    if importlib.util.find_spec(f"{package}.{name}") is None:
        return None
    return importlib.import_module(f"{package}.{name}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
