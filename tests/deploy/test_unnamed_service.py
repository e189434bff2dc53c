"""A Service named by ``generateName`` (or with no name at all) stopped the whole check with
``KeyError: 'name'`` where it should judge the rest: such a Service can be named by no
StatefulSet's ``serviceName`` or pod's ``subdomain``, so those still say what they miss."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests


@pytest.mark.parametrize("metadata", [{"generateName": "s-"}, {}, None])
def test_an_unnamed_service_is_judged_as_no_service_of_that_name(metadata):
    objs = copy.deepcopy(render_manifests(job_name="j", workers=1, servers=1, image="d:1"))
    (service,) = [o for o in objs if o["kind"] == "Service"]
    if metadata is None:
        del service["metadata"]
    else:
        service["metadata"] = metadata
    problems = manifest_problems(objs)
    assert any("serviceName 'j-pserver' names no Service of this job" in p for p in problems)
