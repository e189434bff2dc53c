"""A rank's object without ``metadata`` whose ranks are given ``--pservers`` stopped the check
with ``KeyError: 'metadata'`` in ``check._server_lists`` (it read the object's namespace as
``obj["metadata"]``): a workers' Job so written, and since d01d259 a bare Pod that runs the rank,
which before passed unjudged. The rest is judged now, the object named ``?``."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _rendered() -> list[dict]:
    return copy.deepcopy(render_manifests(job_name="j", workers=1, servers=1, image="d:1"))


def test_a_workers_job_without_metadata_is_judged():
    objs = _rendered()
    (job,) = [o for o in objs if o["kind"] == "Job"]
    del job["metadata"]
    problems = manifest_problems(objs)  # was KeyError: 'metadata'
    assert "Job ?: label app.kubernetes.io/name is missing" in problems, problems


def test_a_bare_pod_without_metadata_that_runs_the_rank_is_judged():
    objs = _rendered()
    (job,) = [o for o in objs if o["kind"] == "Job"]
    spec = {**job["spec"]["template"]["spec"], "restartPolicy": "Never"}
    problems = manifest_problems([*objs, {"apiVersion": "v1", "kind": "Pod", "spec": spec}])
    assert "Pod ?: label app.kubernetes.io/name is missing" in problems, problems
    assert not any("--pservers" in p for p in problems), problems  # the shards' names
