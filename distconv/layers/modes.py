"""Whether a forward keeps work for a backward: :func:`forward_only` for evaluation and
prediction, per thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_mode = threading.local()


@contextmanager
def forward_only() -> Iterator[None]:
    """Forward passes inside keep nothing for a backward: evaluation, prediction.

    A layer may keep work from its forward for its backward (a convolution keeps its column
    matrices); inside this block it does not, so memory is not held for a backward that never
    comes. A backward afterwards still works: it rebuilds what it needs. Per thread (ranks may
    run as threads).
    """
    previous = keeps_for_backward()
    _mode.forward_only = True
    try:
        yield
    finally:
        _mode.forward_only = not previous


def keeps_for_backward() -> bool:
    """Whether forward passes on this thread may keep work for a backward."""
    return not getattr(_mode, "forward_only", False)
