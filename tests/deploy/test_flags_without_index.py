"""An Indexed Job whose ranks' command line takes JOB_COMPLETION_INDEX from them (``env -i``)
and whose ranks give one of ``--rank`` and ``--world-size``: such a rank reads no
DISTCONV_WORLD_SIZE (nothing in its environment places it), so its world is its
``--world-size``, or 1. The check judged the variable as if read: a Job of one rank given
``--rank 0`` or ``--world-size 1`` beside ``env -i DISTCONV_WORLD_SIZE=2`` was refused though it
trains, and the others were named for what does not happen."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(60)

_PLACE = (
    "import sys; from distconv.train_args import train_parser as t; "
    "from distconv.runtime import detect_runtime as d, runtime_flags as f; "
    "r = d(f(t().parse_args(sys.argv[1:]))); print(r.rank, r.world_size)"
)
_TAKEN = "the ranks' command line takes JOB_COMPLETION_INDEX from them (env -i, env -u, exec -c)"


def _start(head: list[str], flags: list[str]) -> subprocess.CompletedProcess:
    """``distconv train flags`` placing itself behind ``head``, in a pod of Job index 1."""
    pod = {k: v for k, v in os.environ.items() if not k.startswith("DISTCONV_")}
    pod.update(JOB_COMPLETION_INDEX="1", DISTCONV_WORLD_SIZE="3")
    path = f"PYTHONPATH={os.environ.get('PYTHONPATH', '')}"
    argv = [*head, path, sys.executable, "-c", _PLACE, *flags]
    return subprocess.run(argv, env=pod, capture_output=True, text=True, timeout=30)


def _problems(workers: int, head: list[str], flags: list[str]) -> list[str]:
    job = workers_job(workers, head)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["args"] = [*container["args"], *flags]
    return manifest_problems([job])


@pytest.mark.parametrize("flags", [["--rank", "0"], ["--world-size", "1"]])
def test_a_job_of_one_placed_by_one_flag_passes(flags):
    head = ["env", "-i", "DISTCONV_WORLD_SIZE=2"]
    started = _start(head, flags)
    assert started.stdout.split() == ["0", "1"], started.stderr
    assert _problems(1, head, flags) == []


def test_a_world_size_alone_is_refused_for_what_happens():
    started = _start(["env", "-i"], ["--world-size", "3"])
    assert started.returncode != 0 and "nothing says which one this is" in started.stderr
    assert _problems(3, ["env", "-i"], ["--world-size", "3"]) == [
        f"Job j-worker: --world-size 3 but {_TAKEN}: nothing says which rank each is, and "
        "every rank would refuse to start"
    ]


def test_a_rank_alone_has_a_world_of_one():
    """``--rank 1`` (``$(JOB_COMPLETION_INDEX)`` of pod 1) beside ``env -i
    DISTCONV_WORLD_SIZE=3``: the variable is not read, rank 0 trains alone and the others
    stop; the check said every rank would refuse to start."""
    head = ["env", "-i", "DISTCONV_WORLD_SIZE=3"]
    assert "out of range for world size 1" in _start(head, ["--rank", "1"]).stderr
    assert _start(head, ["--rank", "0"]).stdout.split() == ["0", "1"]
    assert _problems(3, head, ["--rank", "$(JOB_COMPLETION_INDEX)"]) == [
        f"Job j-worker: {_TAKEN}: with no index and no --world-size every rank's world is 1 "
        "rank (the Job runs 3)"
    ]
