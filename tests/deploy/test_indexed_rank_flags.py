"""An Indexed Job whose ranks give both ``--rank`` and ``--world-size`` (``--rank
$(JOB_COMPLETION_INDEX) --world-size 3``, the index filled in by the kubelet before any ``env
-i`` runs): each rank reads neither JOB_COMPLETION_INDEX nor DISTCONV_WORLD_SIZE, so one the
command line empties, sets again or never sets stops nothing. The check refused such a Job:
with no variable ("every rank would refuse to start"), behind ``env -i`` ("every rank would
train as rank 0 of 1"), and later behind ``env -i DISTCONV_WORLD_SIZE=3``, which it
passed before."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(60)

_FLAGS = ["--rank", "$(JOB_COMPLETION_INDEX)", "--world-size", "3"]
_PLACE = (
    "import sys; from distconv.train_args import train_parser as t; "
    "from distconv.runtime import detect_runtime as d, runtime_flags as f; "
    "r = d(f(t().parse_args(sys.argv[1:]))); print(r.rank, r.world_size)"
)


def _placed(head: list[str], env: dict[str, str]) -> list[str]:
    """Where ``distconv train --rank 1 --world-size 3`` (as the kubelet passes the flags to
    the pod of index 1) places itself, started behind ``head`` in environment ``env``."""
    path = f"PYTHONPATH={os.environ.get('PYTHONPATH', '')}"
    argv = [*head, path, sys.executable, "-c", _PLACE, "--rank", "1", "--world-size", "3"]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.mark.parametrize(
    ("head", "drop"),
    [
        ([], True),  # no DISTCONV_WORLD_SIZE at all
        (["env", "-i"], False),  # emptied: no index, no variable
        (["env", "-i", "DISTCONV_WORLD_SIZE=3"], False),  # the variable without the index
        (["env", "-i", "DISTCONV_WORLD_SIZE=2"], False),  # a stale one, never read
    ],
)
def test_ranks_placed_by_both_flags_read_no_variable(head, drop):
    pod = {k: v for k, v in os.environ.items() if not k.startswith("DISTCONV_")}
    pod["JOB_COMPLETION_INDEX"] = "1"
    if not drop:
        pod["DISTCONV_WORLD_SIZE"] = "3"
    assert _placed(head or ["env"], pod) == ["1", "3"]
    job = workers_job(3, head)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["args"] = [*container["args"], *_FLAGS]
    if drop:
        container["env"] = [v for v in container["env"] if v["name"] != "DISTCONV_WORLD_SIZE"]
    assert manifest_problems([job]) == []


def test_one_flag_alone_is_still_judged():
    """``--world-size 3`` alone behind ``env -i DISTCONV_WORLD_SIZE=3``: no index and no
    ``--rank``, so every rank refuses to start, and the check still says so."""
    job = workers_job(3, ["env", "-i", "DISTCONV_WORLD_SIZE=3"])
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["args"] = [*container["args"], "--world-size", "3"]
    (problem,) = manifest_problems([job])
    assert problem.endswith("every rank would refuse to start")
