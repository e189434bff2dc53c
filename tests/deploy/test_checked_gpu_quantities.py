"""A GPU count is a Kubernetes quantity: the API server takes any whole number of devices
however the quantity spells it (``"1000m"``, ``"1e0"``, ``"+1"``), but 0eb9736 took only an
integer, a whole float or ASCII digits, and refused the rest of a valid job ('must be a whole
number of devices') (review k311)."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_checked_gpu_counts import _FIELD, _gpu_job_asking

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("value", ["1000m", "1e0", "+1", "1.", "0.001k"])
def test_one_gpu_in_any_spelling_of_the_quantity_passes(value):
    assert manifest_problems(_gpu_job_asking(value)) == []


@pytest.mark.parametrize("value", ["1500m", "1e-3", "-1", "1 ", "1Gx", ".5"])
def test_a_quantity_of_no_whole_device_is_named(value):
    problems = manifest_problems(_gpu_job_asking(value))
    assert problems[0] == f"Job j-worker: {_FIELD} must be a whole number of devices, got {value!r}"
