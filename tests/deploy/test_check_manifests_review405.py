"""``distconv check-manifests``: review k405's findings, each shown by a test that failed
before its fix."""

from __future__ import annotations

import io
import sys

import pytest

from distconv.deploy import check_command

pytestmark = pytest.mark.timeout(30)


def test_a_stdin_with_no_descriptor_is_read(monkeypatch):
    """A stdin held in memory (``main()`` called with ``sys.stdin`` replaced, as a wrapper or
    a test does) has no descriptor to poll: it was refused as ``<stdin>: fileno`` once the
    read of a non-blocking stdin registered it with ``poll`` before its first read."""
    text = b"kind: ConfigMap\nmetadata:\n  name: c\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
    assert check_command._read(check_command.STDIN) == text
