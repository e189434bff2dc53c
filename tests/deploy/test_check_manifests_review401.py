"""``distconv check-manifests``: review k401's findings, each shown by a test that failed
before its fix."""

from __future__ import annotations

import pytest

from tests.deploy.test_counts import PSERVER, _problems_with

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("start", "problem"),
    [
        (2**31, "must be at most 2147483647 (an int32), got 2147483648"),
        (-1, "must be an integer >= 0, got -1"),
        ("2", "must be an integer >= 0, got '2'"),
    ],
)
def test_an_ordinals_start_the_api_server_refuses_is_named(start, problem):
    """``spec.ordinals.start`` is an int32 >= 0: past int32, ``known_count`` gives None and the
    check of the pods' host names judged nothing, with no line saying why."""
    problems = _problems_with(PSERVER, "StatefulSet", ("ordinals",), {"start": start})
    assert problems == [f"StatefulSet ps-pserver spec.ordinals: start {problem}"]


def test_ordinals_of_no_mapping_is_named_once_not_indexed():
    """``ordinals: restart`` holds no ``start`` ("start" is in the string, which is never
    indexed as a mapping): one line, the shape's. (Guards the fix's own branch; it passed
    before the fix too.)"""
    problems = _problems_with(PSERVER, "StatefulSet", ("ordinals",), "restart")
    assert problems == ["StatefulSet ps-pserver: spec.ordinals must be a mapping, got 'restart'"]
