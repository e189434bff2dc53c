"""Objects in a ``kind: List`` (``kubectl get -o yaml`` writes one; ``kubectl apply`` creates
each item) are judged as the objects they hold: a List was judged as one object with no pod
template, so a bad Job in it passed every check, and the List itself was named for labels.
An empty YAML document (None), which kubectl skips, is skipped: it stopped the
check with AttributeError."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _rendered() -> list[dict]:
    return copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))


def test_a_list_of_the_rendered_objects_passes():
    assert manifest_problems([{"apiVersion": "v1", "kind": "List", "items": _rendered()}]) == []


def test_a_bad_job_in_a_list_is_named_as_alone():
    objs = _rendered()
    (job,) = [o for o in objs if o["kind"] == "Job"]
    job["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    alone = manifest_problems(objs)
    assert any("restartPolicy" in p for p in alone)
    half = len(objs) // 2
    nested = {"kind": "List", "items": [*objs[:half], {"kind": "JobList", "items": objs[half:]}]}
    assert manifest_problems([nested]) == alone


def test_an_empty_yaml_document_is_skipped_as_kubectl_skips_it():
    objs = _rendered()
    assert manifest_problems([None, *objs, None]) == []  # was AttributeError on None
    assert manifest_problems([{"kind": "List", "items": [None, *objs]}]) == []
