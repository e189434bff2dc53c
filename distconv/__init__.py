"""distconv: a hackable data-parallel training framework.

Layers run forward and ``backward(callback)`` on NCHW arrays (numpy on the CPU, cupy on a GPU);
each parameter calls ``inc_update(callback)`` the moment its gradient is complete, which is the
seam where a sync strategy (local optimizer, parameter server, allreduce) takes over.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and editors see; at run time, __getattr__ below
    from distconv.arg import Arg
    from distconv.build_identity import build_id
    from distconv.network import Network
    from distconv.parameter import Parameter
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

__all__ = ["Arg", "Network", "Parameter", "Trainer", "build_id"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'distconv' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
