"""An object's or pod template's ``metadata`` that is no mapping (``metadata: x``, a list, a
number) stopped the check with ``AttributeError: ... has no attribute 'get'`` wherever it was
read (``walk._where``, the labels, the Services' index), so nothing else was judged. The API
server refuses it: the check now names it and judges the rest."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)

VALUES = ["x", [], 5]


def _rendered() -> list[dict]:
    return copy.deepcopy(render_manifests(job_name="j", workers=1, servers=1, image="d:1"))


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("kind", ["Job", "StatefulSet", "Service"])
def test_an_objects_metadata_that_is_no_mapping_is_named(kind, value):
    objs = _rendered()
    (obj,) = [o for o in objs if o["kind"] == kind]
    obj["metadata"] = value
    assert f"{kind} ?: metadata must be a mapping, got {value!r}" in manifest_problems(objs)


@pytest.mark.parametrize("value", VALUES)
def test_a_pod_templates_or_bare_pods_metadata_that_is_no_mapping_is_named(value):
    objs = _rendered()
    (job,) = [o for o in objs if o["kind"] == "Job"]
    spec = {**job["spec"]["template"]["spec"], "restartPolicy": "Never"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": value, "spec": spec}
    job["spec"]["template"]["metadata"] = value
    problems = manifest_problems([*objs, pod])
    assert f"Job j-worker pod template: metadata must be a mapping, got {value!r}" in problems
    assert f"Pod ?: metadata must be a mapping, got {value!r}" in problems
