"""A ``kind: List`` whose ``items:`` is null (nothing written after it) holds no object, as
kubectl reads it; the check judged it as an object of its own and refused it for its labels
(``List ?: label app.kubernetes.io/name is missing``), beside objects that pass."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def test_a_list_of_null_items_holds_no_object():
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    empty = {"apiVersion": "v1", "kind": "List", "items": None}
    assert manifest_problems([empty, *objs]) == []
    assert manifest_problems([{"kind": "List", "items": [empty, *objs]}]) == []
