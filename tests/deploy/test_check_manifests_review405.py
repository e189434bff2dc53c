"""``distconv check-manifests``: review k405's findings, each shown by a test that failed
before its fix."""

from __future__ import annotations

import io
import sys

import pytest

from distconv.deploy import check_command, manifest_problems
from tests.deploy.test_rank_checks_stateful_ranks import _sts

pytestmark = pytest.mark.timeout(30)


def test_a_stdin_with_no_descriptor_is_read(monkeypatch):
    """A stdin held in memory (``main()`` called with ``sys.stdin`` replaced, as a wrapper or
    a test does) has no descriptor to poll: it was refused as ``<stdin>: fileno`` once the
    read of a non-blocking stdin registered it with ``poll`` before its first read."""
    text = b"kind: ConfigMap\nmetadata:\n  name: c\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text)))
    assert check_command._read(check_command.STDIN) == text


def test_the_pods_placement_is_shown_for_five_then_counted():
    """Each pod's placement went into the line: 1000 pods that each train alone as rank 0 of
    1 made a line of 1000 entries (of megabytes for a StatefulSet of millions). Five are
    shown, then how many more, as the shards' names are."""
    objs = _sts(1000, {})
    (problem,) = [p for p in manifest_problems(objs) if "ranks would take" in p]
    shown = "; ".join(f"j-worker-{n}: rank 0 of 1" for n in range(5))
    assert f"the ranks would take ({shown} and 995 more), not each pod its own of 1000" in problem
