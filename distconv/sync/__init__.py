"""What runs behind the ``inc_update`` callback.

One interface (:class:`SyncStrategy`) and a factory that imports a transport only when it is
chosen, so single-process use needs neither mpi4py nor pyzmq.
"""

from __future__ import annotations

from typing import Any

from distconv.sync.base import SyncStrategy

__all__ = ["SyncStrategy", "create_sync"]


def create_sync(kind: str, **kwargs: Any) -> SyncStrategy:
    """Build the sync strategy named ``kind`` (``"local"`` for now)."""
    if kind == "local":
        from distconv.sync.local import LocalSync

        return LocalSync(**kwargs)
    raise ValueError(f"unknown sync strategy {kind!r}; available: ['local']")
