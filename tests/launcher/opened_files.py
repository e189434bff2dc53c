"""The files this process opens while a block runs: :func:`opened`, for a test that a check
reads a file once (two reads could answer of two versions of a file being written).

An audit hook cannot be removed: one is added, at this module's import, and it counts only
inside :func:`opened`."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

_counting: list[list[str]] = []  # the list of the block that counts now (one at a time)


def _count_opens(event: str, args: tuple) -> None:
    if _counting and event == "open" and isinstance(args[0], str):
        _counting[-1].append(args[0])


sys.addaudithook(_count_opens)


@contextmanager
def opened() -> Iterator[list[str]]:
    """The paths (as given to ``open``) opened inside the block, in order, repeats kept."""
    paths: list[str] = []
    _counting.append(paths)
    try:
        yield paths
    finally:
        _counting.remove(paths)
