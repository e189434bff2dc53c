"""Which values are the state of their process alone (a thread, a lock, an open file, a queue
between threads): :mod:`distconv.plain_json` writes them by their type's name, as the layers'
settings do. It imports nothing of distconv.
"""

from __future__ import annotations

import collections.abc
import gc
import io
import os
import queue
import socket
import sys
import threading
import types
import weakref
from typing import Any

#: the process's own state of modules always loaded: known once, not made again at each value
#: walked (type(threading.Lock()) makes a lock)
_PROCESS_STATE: tuple[type, ...] = (
    threading.Thread,
    io.IOBase,
    socket.socket,
    type(threading.Lock()),
    type(threading.RLock()),
    threading.Condition,
    threading.Semaphore,
    threading.Event,
    threading.Barrier,
    queue.Queue,
    type(os.environ),  # a mapping: its text and walk were the rank's whole environment
    weakref.WeakKeyDictionary,  # what the process keeps alive: a cache (singledispatch's)
    weakref.WeakValueDictionary,
    weakref.WeakSet,
)
#: the same of modules a config may hold only once its program imported them: looked up then
_LOADED_PROCESS_STATE = (
    ("multiprocessing.process", "BaseProcess"),
    ("multiprocessing.synchronize", "SemLock"),  # its Lock's text names its owner
    ("multiprocessing.synchronize", "Event"),  # and whether it is set
    ("multiprocessing.synchronize", "Condition"),  # its lock's owner
    ("concurrent.futures", "Executor"),
    ("asyncio", "Queue"),  # an asyncio.Queue's text holds its items
    ("asyncio", "Event"),
    ("asyncio", "Lock"),
    ("asyncio", "Semaphore"),
    ("asyncio", "Condition"),  # locked or not
    ("asyncio", "Barrier"),  # its waiters (Python 3.11 on)
    ("random", "Random"),  # what it drew: gauss_next, set by every other random.gauss
)


def is_process_state(value: Any) -> bool:
    """Whether ``value`` is state of its process alone (a thread, a process, an executor, a
    lock or other threading primitive, a queue between threads, an open file or socket, a
    ``random.Random``: the bound ``random.random`` and ``random.gauss`` walk it; ``os.environ``,
    a mapping the bound ``os.environ.get`` walks: each rank's own ``OMPI_COMM_WORLD_RANK``,
    host name, paths; ``sys.modules``, which ``sys.modules.get`` walks: every module the
    process imported, another list where a rank imported others first, and ``vars(sys)``,
    which holds it beside the rank's ``argv``, ``path`` and streams; a weak table or set,
    what the process keeps alive: a ``functools.singledispatch`` function's cache of the
    types it was called with), written by its type's name (:func:`state_name`; a queue's
    contents are what its threads have done by then): its text held a thread's ident, a pid,
    a lock's state, a per-rank file name."""
    if is_process_dict(value) or isinstance(value, _PROCESS_STATE):
        return True
    if type(value) in _VIEWS and _view_name(value) is not None:  # sys.modules.keys()
        return True
    for module, name in _LOADED_PROCESS_STATE:
        found = getattr(sys.modules.get(module), name, None)  # only once imported: no cost
        if isinstance(found, type) and isinstance(value, found):
            return True
    return False


def is_process_dict(value: Any) -> bool:
    """Whether ``value`` is a plain dict of the process alone: ``sys.modules`` or ``vars(sys)``
    (checked by identity: any other dict is walked, at no cost); a proxy or view of either is
    process state too (:func:`is_process_state`)."""
    return value is sys.modules or value is sys.__dict__


def state_name(value: Any) -> str:
    """The text :func:`is_process_state`'s ``value`` is written as: its type's name
    (``_Environ``, ``lock``), ``sys.modules`` and ``vars(sys)`` by those names (their type's,
    ``dict``, names any)."""
    if is_process_dict(value):
        return "sys.modules" if value is sys.modules else "vars(sys)"
    return _view_name(value) or type(value).__qualname__


#: the types that show a mapping through another face, and how one of them is written: a
#: read-only proxy (``types.MappingProxyType``), a dict's keys, values and items views, and a
#: Mapping's (``os.environ.keys()``: ``collections.abc.KeysView``, exactly that type)
_VIEWS = {
    types.MappingProxyType: "mappingproxy({})",
    type({}.keys()): "{}.keys()",
    type({}.values()): "{}.values()",
    type({}.items()): "{}.items()",
    collections.abc.KeysView: "{}.keys()",
    collections.abc.ValuesView: "{}.values()",
    collections.abc.ItemsView: "{}.items()",
}


def _view_name(value: Any) -> str | None:
    """The text of a proxy or view of a mapping of the process's own (:func:`is_process_state`:
    ``sys.modules.keys()``, ``mappingproxy(sys.modules)``, ``mappingproxy(_Environ)``,
    ``_Environ.items()``; a proxy's own proxy too), or None for any other value: one rule for
    every such mapping, not for each. Walked, a proxy of ``sys.modules`` listed every module
    the rank imported, and one of ``os.environ`` its whole environment; a view's text did."""
    form = _VIEWS.get(type(value))
    if form is None or (shown := _shown(value)) is None:
        return None
    if type(shown) in _VIEWS:  # a proxy's proxy: once down the chain, not again for its name
        inner = _view_name(shown)
    else:
        inner = state_name(shown) if is_process_state(shown) else None
    return None if inner is None else form.format(inner)


def _shown(view: Any) -> Any:
    """The mapping a proxy or view shows, or None where it is not found: a Mapping's view holds
    it in its slot, a proxy or a dict's view as the one object it refers to (its traversal,
    ``gc.get_referents``: no walk of the mapping, no collection). A copy (``os.environ.copy()``,
    ``dict(sys.modules)``) is no view: a dict of the config's own, walked."""
    if type(view) in _MAPPING_VIEWS:  # exactly: a dict's views are registered as their kin
        try:
            return _MAPPING_SLOT.__get__(view)
        except AttributeError:  # a view whose slot was never set
            return None
    shown = gc.get_referents(view)
    return shown[0] if len(shown) == 1 else None


#: a Mapping's views, and their slot: read by its descriptor, as it is stored
_MAPPING_VIEWS = (collections.abc.KeysView, collections.abc.ValuesView, collections.abc.ItemsView)
_MAPPING_SLOT = collections.abc.MappingView.__dict__["_mapping"]
