"""An Indexed Job without ``completions`` is refused by the API server ("spec.completions:
Required value: when completion mode is Indexed"); the check compared the ranks' counts with
"completions None" instead, or passed it where those counts are the cluster's."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)

NEEDS = "Job j-worker: completionMode Indexed needs completions"


def _objs() -> tuple[list[dict], dict]:
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    return objs, job


@pytest.mark.parametrize("drop", [["completions"], ["completions", "parallelism"]])
def test_an_indexed_job_without_completions_is_named_once(drop):
    objs, job = _objs()
    for field in drop:
        del job["spec"][field]
    (problem,) = manifest_problems(objs)
    assert problem.startswith(NEEDS), problem
    assert "None" not in problem


def test_an_indexed_job_without_completions_is_refused_whatever_its_ranks_read():
    """The ranks' world size and the shards' --workers the cluster fills in: nothing was
    compared, and the Job passed."""
    objs, job = _objs()
    del job["spec"]["completions"]
    del job["spec"]["parallelism"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    for var in container["env"]:
        if var["name"] == "DISTCONV_WORLD_SIZE":
            del var["value"]
            var["valueFrom"] = {"configMapKeyRef": {"name": "sizes", "key": "world"}}
    (shards,) = [o for o in objs if o["kind"] == "StatefulSet"]
    (shard,) = shards["spec"]["template"]["spec"]["containers"]
    shard["args"][shard["args"].index("--workers") + 1] = "$(N)"
    shard["env"].append({"name": "N", "valueFrom": {"configMapKeyRef": {"name": "s", "key": "n"}}})
    assert [p for p in manifest_problems(objs) if p.startswith(NEEDS)]


def test_a_job_that_is_not_indexed_needs_no_completions():
    objs, job = _objs()
    job["spec"] = {k: v for k, v in job["spec"].items() if k != "completionMode"}
    job["spec"]["completions"] = job["spec"]["parallelism"] = 1
    assert not [p for p in manifest_problems(objs) if "needs completions" in p]
