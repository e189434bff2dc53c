"""A value that is no mapping, at top level or among a ``kind: List``'s items (``- 1``,
``- x``), stopped the check with ``AttributeError: ... has no attribute 'get'`` in
``check._listed``; kubectl apply refuses it, so the check names it and judges the rest.
"""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("value", [1, "x", [1]])
def test_a_non_object_is_named_not_a_crash(value):
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    named = [f"{value!r} is no object (kind, metadata, ...): kubectl apply refuses it"]
    assert manifest_problems([{"kind": "List", "items": [*objs, value]}]) == named
    assert manifest_problems([value, *objs]) == named
