"""A communicator that notes every MPI call made while another thread is inside one.

``MPI_THREAD_SERIALIZED`` lets several threads call MPI, one at a time; MPICH does not check
it, and two overlapping calls may work for years before they corrupt a message. Wrapped in
:class:`OneCallAtATime`, a communicator (and every communicator and request it hands out)
records each call's thread and any overlap, so a test can assert the discipline itself.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class CallLog:
    """The calls of one job's communicators: per thread, and those that overlapped another."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside: str | None = None  # the call in progress, if any
        self.by_thread: Counter[str] = Counter()
        self.overlaps: list[str] = []

    @contextmanager
    def call(self, name: str) -> Iterator[None]:
        this = f"{name} on {threading.current_thread().name}"
        with self._lock:
            self.by_thread[threading.current_thread().name] += 1
            first = self._inside is None
            if first:
                self._inside = this
            else:
                self.overlaps.append(f"{this} while {self._inside}")
        try:
            yield
        finally:
            if first:
                with self._lock:
                    self._inside = None


class OneCallAtATime:
    """Forwards everything to ``target``, logging each method call in ``log``; the
    communicators and requests it returns are wrapped too."""

    def __init__(self, target: Any, log: CallLog | None = None) -> None:
        self._target = target
        self.log = log if log is not None else CallLog()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr
        return self._logged(name, attr)

    def _logged(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            with self.log.call(name):
                result = method(*args, **kwargs)
            talks = hasattr(result, "Test") or hasattr(result, "Dup")  # a request, a comm
            return OneCallAtATime(result, self.log) if talks else result

        return call
