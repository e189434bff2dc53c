"""A GPU count is a Kubernetes quantity: the API server takes any whole number of devices
however the quantity spells it (``"1000m"``, ``"1e0"``, ``"+1"``), but 0eb9736 took only an
integer, a whole float or ASCII digits, and refused the rest of a valid job ('must be a whole
number of devices')."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_checked_gpu_counts import _FIELD, _gpu_job_asking

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("value", ["1000m", "1e0", "+1", "1.", "0.001k"])
def test_one_gpu_in_any_spelling_of_the_quantity_passes(value):
    assert manifest_problems(_gpu_job_asking(value)) == []


@pytest.mark.parametrize(
    "value", ["1500m", "1e-3", "-1", "1Gx", ".5", "1.0000000001", "1.0001", "0.999", "1e+"]
)
def test_a_quantity_of_no_whole_device_is_named(value):
    problems = manifest_problems(_gpu_job_asking(value))
    assert problems[0] == f"Job j-worker: {_FIELD} must be a whole number of devices, got {value!r}"


@pytest.mark.parametrize("value", [" 1", "1 \n", "1e0000", "+1e+0", "0.9999999999"])
def test_one_gpu_as_the_api_server_reads_the_text_passes(value):
    """2bbb81c's parser refused what the API server still reads as 1 GPU: Quantity.UnmarshalJSON
    trims the text (strings.TrimSpace) before ParseQuantity, whose exponent is any number of
    digits, and ParseQuantity rounds a value up to a whole nano-unit before the validation's
    ``MilliValue() % 1000``."""
    assert manifest_problems(_gpu_job_asking(value)) == []


@pytest.mark.parametrize("value", ["-0", "+", "."])
def test_a_quantity_of_no_device_is_counted_as_zero(value):
    """``-0`` is not below 0, and a sign or a point alone is 0 to ParseQuantity: each is read as
    0 GPUs, like ``0``."""
    assert manifest_problems(_gpu_job_asking(value)) == manifest_problems(_gpu_job_asking(0))


@pytest.mark.parametrize("value", ["0.9995", "999.1m", "0.99999"])
def test_a_quantity_whose_millis_round_up_to_one_gpu_passes(value):
    """The validation reads ``MilliValue()``, which rounds up to a whole milli-unit (ceil(q *
    1000)), not the nano-units 5823a0e rounded to: ``0.9995`` is 1000m, 1 GPU, and the API
    server takes it."""
    assert manifest_problems(_gpu_job_asking(value)) == []


@pytest.mark.parametrize(
    ("value", "named"),
    [
        ("1e" + "0" * 5000, False),
        ("0" * 5000 + "1", False),
        ("1." + "0" * 5000, False),
        ("0." + "9" * 5000, False),
        ("1e1" + "0" * 5000, True),
        ("1" * 5000 + ".5", True),
    ],
    ids=["exponent-zeros", "leading-zeros", "trailing-zeros", "nines", "huge-exponent", "long"],
)
def test_a_quantity_of_many_digits_is_read_not_crashed_on(value, named):
    """Python's int() refuses a text of over 4300 digits (ValueError), so 5823a0e's reading of
    a long quantity crashed the check; ParseQuantity reads any number of digits: ``1e`` then
    5000 zeros is 1 GPU. A huge exponent is named, as before."""
    problems = manifest_problems(_gpu_job_asking(value))
    assert bool(problems) is named
    if named:
        assert problems[0].startswith(f"Job j-worker: {_FIELD} must be a whole number")
