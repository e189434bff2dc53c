"""A GPU count the API server refuses (``nvidia.com/gpu: x``, a list, a date, ``1.5``, ``-1``)
stopped the whole check with a ValueError or TypeError in the sum of a pod's GPUs, so nothing
else was judged (found by mutating the k8s/*-gpu examples at random): it is named
once, and a count written as text or a whole float (``"2"``, ``2.0``) is still taken."""

from __future__ import annotations

import copy
import datetime

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)

_FIELD = "spec.template.spec.containers[0].resources.limits.nvidia.com/gpu"


def _gpu_job_asking(value: object) -> list[dict]:
    """The rendered GPU job, its worker container's GPU limit set to ``value``."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1", gpus=1))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = (
        value
    )
    return objs


@pytest.mark.parametrize("value", ["x", "$(GPUS)", [1], datetime.date(2024, 1, 1), "1.5", -1])
def test_a_gpu_count_that_is_no_whole_number_is_named_not_crashed_on(value):
    problems = manifest_problems(_gpu_job_asking(value))
    line = f"Job j-worker: {_FIELD} must be a whole number of devices, got {value!r}"
    assert problems[0] == line


@pytest.mark.parametrize("value", [1, "1", 1.0])
def test_a_gpu_count_as_an_integer_its_text_or_a_whole_float_passes(value):
    assert manifest_problems(_gpu_job_asking(value)) == []
