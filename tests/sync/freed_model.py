"""Whether a sync lets go of a model it no longer trains: shared by the tests of each
strategy's ``setup`` (the base's, and the parameter server's own)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable

from distconv.parameter import Parameter


def freed_by_next_setup(sync, make_first: Callable[[], Parameter], second: Parameter) -> bool:
    """``make_first()``'s parameter, after one step through ``sync``, is garbage once ``sync``
    is set up with ``second``: the caller holds no reference to it, so only the sync could."""
    first = make_first()
    sync.setup([first])
    sync.start_step(1)
    first.grad[...] = 1.0
    sync.on_gradient(first)
    sync.finish_step()
    dropped = weakref.ref(first)
    del first
    sync.setup([second])
    gc.collect()
    return dropped() is None
