"""Python's own SIGINT handler in a test's process, as in a terminal: a fixture apart from
:mod:`tests.signals`, which ranks started by mpiexec import without pytest."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def python_handles_sigint() -> Iterator[None]:
    """Python's own SIGINT handler in the test's process, as in a terminal, put back after the
    test: pytest started by a script's ``&`` or ``nohup`` inherits SIGINT ignored, which a fit
    rightly leaves alone. Autouse in each test module that imports it (``# noqa: F401``)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
