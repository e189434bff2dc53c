"""A world size the ranks read as no number (``1_0``, ``١٠``: Python's digit grouping, another
script's digits) is refused by every rank (``DISTCONV_WORLD_SIZE must be an integer``); the check
read it with ``int()``, as 10, and passed a Job of 10."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.runtime import RuntimeConfigError, detect_runtime

pytestmark = pytest.mark.timeout(60)


def _job_with_world_size(value: str) -> list[dict]:
    objs = copy.deepcopy(render_manifests(job_name="j", workers=10, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    for var in container["env"]:
        if var["name"] == "DISTCONV_WORLD_SIZE":
            var["value"] = value
    return objs


@pytest.mark.parametrize("value", ["1_0", "١٠"])
def test_a_world_size_the_ranks_cannot_read_is_refused(value):
    env = {"JOB_COMPLETION_INDEX": "3", "DISTCONV_WORLD_SIZE": value}
    with pytest.raises(RuntimeConfigError, match="must be an integer"):
        detect_runtime(environ=env)
    problems = manifest_problems(_job_with_world_size(value))
    assert f"Job j-worker: DISTCONV_WORLD_SIZE {value!r} != completions 10" in problems


@pytest.mark.parametrize("value", ["10", "010", " 10 ", "+10"])
def test_a_world_size_the_ranks_read_as_the_completions_passes(value):
    env = {"JOB_COMPLETION_INDEX": "3", "DISTCONV_WORLD_SIZE": value}
    assert detect_runtime(environ=env).world_size == 10
    assert manifest_problems(_job_with_world_size(value)) == []


def test_an_mpijob_world_size_in_digit_groups_is_refused():
    objs = copy.deepcopy(render_manifests(job_name="m", workers=4, servers=0, image="d:1"))
    spec = objs[0]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    spec["containers"][0]["env"].append({"name": "DISTCONV_WORLD_SIZE", "value": "0_4"})
    (problem,) = manifest_problems(objs)
    assert "DISTCONV_WORLD_SIZE '0_4' but mpirun starts 4 ranks" in problem
