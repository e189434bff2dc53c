"""A ``kind: List`` whose ``items`` is a mapping (one object written without the ``-``) was
judged as that one object, so a manifest ``kubectl apply`` refuses passed the check (or was
judged as a List and so not at all). kubectl refuses it: the check names it, like an item that
is no object."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _rendered() -> list[dict]:
    return copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))


@pytest.mark.parametrize("kind", ["List", "JobList"])
def test_items_that_are_one_mapping_are_refused(kind):
    (service, shards, job) = _rendered()
    problems = manifest_problems([service, shards, {"kind": kind, "items": job}])
    line = f"{kind} items must be a list of objects, got a mapping: kubectl apply refuses it"
    assert problems == [line]


@pytest.mark.parametrize("items", ["x", 5])
def test_items_that_are_no_list_are_refused(items):
    problems = manifest_problems([*_rendered(), {"kind": "List", "items": items}])
    assert problems == [
        f"List items must be a list of objects, got {items!r}: kubectl apply refuses it"
    ]


def test_a_list_without_items_or_with_null_items_is_empty():
    assert manifest_problems([*_rendered(), {"kind": "List"}]) == []
    assert manifest_problems([*_rendered(), {"kind": "List", "items": None}]) == []


def test_a_list_of_the_objects_is_judged_as_they_are():
    assert manifest_problems([{"kind": "List", "items": _rendered()}]) == []


@pytest.mark.parametrize(
    ("items", "got"), [({}, "a mapping"), ("", "''"), (0, "0"), (False, "False")]
)
def test_empty_items_that_are_no_list_are_refused(items, got):
    """An empty mapping, an empty string, 0 or false was read as an empty List
    (``items or []``), though kubectl refuses each as it does any other value that is no list."""
    problems = manifest_problems([*_rendered(), {"kind": "List", "items": items}])
    assert problems == [
        f"List items must be a list of objects, got {got}: kubectl apply refuses it"
    ]
