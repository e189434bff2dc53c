"""The rank thread check reads a CPU limit as the API server reads any quantity, by the one
parser the device counts use (:func:`distconv.deploy.counts.quantity_amount`): its own copy
read a long exponent with ``int()``, which refuses more than 4300 digits, and the check
stopped in a traceback on a limit the API server takes (``"1e"`` then 4400 zeros and a 2 is
100 CPUs)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from distconv.deploy.counts import cpu_amount, quantity_amount, whole_quantity
from tests.deploy.hand_edits import copied_example, edit, passes, problems

pytestmark = pytest.mark.timeout(120)

WORKERS = "job-digits-ps-worker.yaml"
#: 100 CPUs, its exponent written with 4401 digits
LONG_EXPONENT = "1e" + "0" * 4400 + "2"


def _cpu_limit(cpu: object):
    def change(job: dict) -> None:
        (container,) = job["spec"]["template"]["spec"]["containers"]
        container["resources"]["limits"]["cpu"] = cpu

    return change


def test_a_limit_with_a_long_exponent_is_read_not_a_traceback(tmp_path):
    folder = copied_example("pserver", tmp_path)
    edit(folder / WORKERS, _cpu_limit(LONG_EXPONENT))
    passes(folder)  # 100 CPUs: the example's 2 threads fit


def test_a_fractional_limit_still_names_the_threads_past_it(tmp_path):
    folder = copied_example("pserver", tmp_path)
    edit(folder / WORKERS, _cpu_limit("1500m"))
    (problem,) = problems(folder)
    assert "the 1.5 CPU(s) of its limit (resources.limits.cpu 1500m)" in problem, problem
    assert problem.endswith("set them to 1"), problem


@pytest.mark.parametrize(
    ("value", "amount"),
    [
        (2, Fraction(2)),
        (1.5, Fraction(3, 2)),
        (0.1, Fraction(1, 10)),
        ("500m", Fraction(1, 2)),
        (" 1Ki", Fraction(1024)),
        ("-2", Fraction(-2)),
        (LONG_EXPONENT, Fraction(100)),
        ("1e1000", None),
        ("x", None),
        (float("inf"), None),
        (None, None),
    ],
)
def test_one_parser_reads_every_quantity(value, amount):
    assert quantity_amount(value) == amount


def test_cpus_round_up_to_a_milli_cpu_and_devices_are_whole():
    assert cpu_amount("0.0001") == Fraction(1, 1000)
    assert cpu_amount("-1") is None and cpu_amount("1.5 CPUs") is None
    assert whole_quantity("2000m") == 2 and whole_quantity(1.5) is None
    assert whole_quantity("0.9995") == 1 and whole_quantity(-1) is None
    assert whole_quantity(10**5000) == 10**5000  # no str() of it, which refuses 4300 digits
