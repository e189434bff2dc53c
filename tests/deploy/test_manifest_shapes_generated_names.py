"""A problem of an object named by ``generateName`` named it ``?`` (``StatefulSet ?: pod
w-xxxxx-0's rank ...``, ``Job ?: restartPolicy ...``), though 45e63a8 placed its pods by the
prefix: the problem now names the object as its pods are named, the prefix and the stand-in for
what the API server appends."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("kind", ["Job", "StatefulSet", "Service"])
def test_a_generated_objects_problem_names_it(kind):
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (obj,) = [o for o in objs if o["kind"] == kind]
    obj["metadata"]["generateName"] = obj["metadata"].pop("name") + "-"
    del obj["metadata"]["labels"]
    prefix = obj["metadata"]["generateName"]
    problems = [p for p in manifest_problems(objs) if "label" in p]
    assert problems == [
        f"{kind} {prefix}xxxxx: label app.kubernetes.io/{key} is missing"
        for key in ("name", "instance", "component")
    ]
