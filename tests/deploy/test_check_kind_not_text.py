"""An object whose ``kind`` is no string (``kind: 5``, ``kind: [Job]``), which kubectl apply
refuses, was named by nothing, and its fields were not typed at all: the field types table
(commit 53d977b) gave such an object no rule, so a wrong-typed field in its pod
template (``resources: x``) still stopped the check with a traceback."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _job_of_kind(kind) -> tuple[list[dict], dict]:
    """The rendered job, its worker Job's kind set to ``kind``; and that object's container."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    job["kind"] = kind
    return objs, job["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("kind", [5, 3.0, ["Job"], {"a": 1}, True])
def test_a_kind_that_is_no_string_is_named(kind):
    objs, _ = _job_of_kind(kind)
    problems = manifest_problems(objs)
    assert f"{kind} j-worker: kind must be a string, got {kind!r}: kubectl apply refuses it" in (
        problems
    )


@pytest.mark.parametrize("kind", [5, ["Job"]])
def test_a_wrong_typed_field_of_such_an_object_is_named_not_crashed_on(kind):
    objs, container = _job_of_kind(kind)
    container["resources"] = "x"
    problems = manifest_problems(objs)
    line = f"{kind} j-worker: spec.template.spec.containers[0].resources must be a mapping"
    assert f"{line}, got 'x'" in problems


@pytest.mark.parametrize("kind", [None, ""], ids=["absent", "empty"])
def test_an_object_without_a_kind_is_named(kind):
    """c2de023 named a kind that is no string but left out one that is not
    there (or null, or ''), which kubectl refuses too ("Object 'Kind' is missing"): the worker
    Job so written passed with no line, though nothing of it would be created."""
    objs, _ = _job_of_kind(kind)
    if kind is None:
        del objs[2]["kind"]
    assert manifest_problems(objs) == [
        "? j-worker: kind is missing: kubectl apply refuses an object without one"
    ]
