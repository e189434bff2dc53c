"""What runs behind the ``inc_update`` callback.

One interface (:class:`SyncStrategy`) and a factory that imports a transport only when it is
chosen, so single-process use needs neither mpi4py nor pyzmq.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from distconv.sync.base import SyncStrategy
    from distconv.sync.errors import JobRefused, SyncError

    # re-exported for type checkers (``X as X``); at run time by __getattr__, below
    from distconv.sync.local import LocalSync as LocalSync
    from distconv.sync.mpi import MPISync as MPISync
    from distconv.sync.ps.client import PServerSync as PServerSync

# the transports' classes (below) are not in it: ``from distconv.sync import *`` would then
# import their modules and pyzmq (about 0.1 s more), which a script that names none never uses
__all__ = ["JobRefused", "SyncError", "SyncStrategy", "create_sync", "TRANSPORTS"]

#: transport name -> "module:class"; the module is imported only when the transport is chosen
TRANSPORTS = {
    "local": "distconv.sync.local:LocalSync",
    "pserver": "distconv.sync.ps.client:PServerSync",
    "mpi": "distconv.sync.mpi:MPISync",
}


# the package's own name: create_sync's annotation names SyncStrategy through it, so
# typing.get_type_hints, which looks names up in this module's dict and not through
# __getattr__ below, gets it loaded when asked (a bare ``SyncStrategy`` was a NameError in a
# process that had not asked for it yet); distconv is loaded already, so this costs nothing
import distconv  # noqa: E402


def create_sync(kind: str, **kwargs: Any) -> distconv.sync.SyncStrategy:
    """Build the sync strategy named ``kind`` with the transport's own keyword arguments.

    Raises:
        ValueError: an unknown transport name.
        ImportError: the transport's library (pyzmq, mpi4py) is not installed; the message says
            which extra to install.
    """
    if kind not in TRANSPORTS:
        raise ValueError(f"unknown sync strategy {kind!r}; available: {sorted(TRANSPORTS)}")
    module_name, _, class_name = TRANSPORTS[kind].partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, class_name)(**kwargs)


#: the names this package gives from its modules, imported when first asked for: the contract,
#: its errors, and each transport's class (``distconv.sync.LocalSync``, where they live at three
#: depths); PServerSync's module imports pyzmq, MPISync's none (mpi4py waits for one made)
_LAZY = {
    "JobRefused": "distconv.sync.errors",
    "SyncError": "distconv.sync.errors",
    "SyncStrategy": "distconv.sync.base",
    **{path.partition(":")[2]: path.partition(":")[0] for path in TRANSPORTS.values()},
}


# at run time only: a checker that saw ``__getattr__ -> Any`` took every misspelled name
# (``from distconv.sync import LocalSinc``) as Any, so a typo passed ``mypy --strict``
if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """``SyncError``, ``SyncStrategy`` and the transports' classes, imported when first asked
        for (PEP 562), then kept here. ``PServerSync`` imports pyzmq then, not at ``import
        distconv.sync`` (mpi4py waits for an MPISync made); ``SyncStrategy``'s module loads numpy,
        which ``distconv keys``, ``pserver --help`` and every other subpackage's command line
        (``distconv.sync.ps.cli``) would otherwise pay for at each start; ``SyncError``'s module
        loads nothing, so catching it costs no numpy."""
        if name in _LAZY:
            value = globals()[name] = getattr(importlib.import_module(_LAZY[name]), name)
            return value
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
