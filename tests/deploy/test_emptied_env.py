"""An Indexed Job whose ranks' command line empties their environment (``env -i``, bash's
``exec -c``) takes JOB_COMPLETION_INDEX from them along with DISTCONV_WORLD_SIZE: each rank
trains as rank 0 of 1, which is right for a Job of one rank and wrong for more. The check said
"DISTCONV_WORLD_SIZE is not set; every rank would refuse to start" for both: the one-rank Job
was refused though it trains, and the many-rank one for a reason that is not what happens."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(60)

_PLACE = "from distconv.runtime import detect_runtime as d; r = d(); print(r.rank, r.world_size)"


def _placed(head: list[str]) -> subprocess.CompletedProcess:
    """Where a rank of Job index 1 places itself, started behind ``head``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTCONV_")}
    env["JOB_COMPLETION_INDEX"] = "1"
    path = f"PYTHONPATH={os.environ.get('PYTHONPATH', '')}"
    argv = [*head, path, sys.executable, "-c", _PLACE] if head else [sys.executable, "-c", _PLACE]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)


def test_an_emptied_environment_trains_as_rank_0_of_1():
    assert _placed(["env", "-i"]).stdout.split() == ["0", "1"]
    kept = _placed([])  # the Job's index kept: DISTCONV_WORLD_SIZE is needed beside it
    assert kept.returncode != 0 and "DISTCONV_WORLD_SIZE is not set" in kept.stderr


@pytest.mark.parametrize("head", [["env", "-i"], ["env", "--ignore-environment"]])
def test_a_job_of_one_rank_with_an_emptied_environment_passes(head):
    assert manifest_problems([workers_job(1, head)]) == []


def test_a_job_of_more_ranks_is_refused_for_what_happens():
    assert manifest_problems([workers_job(3, ["env", "-i"])]) == [
        "Job j-worker: the ranks' command line takes JOB_COMPLETION_INDEX from them (env -i, "
        "env -u, exec -c): with no index every rank would train as rank 0 of 1 (the Job runs 3)"
    ]


def test_an_index_set_again_after_env_i_is_the_index():
    job = workers_job(3, ["env", "-i", "JOB_COMPLETION_INDEX=$(JOB_COMPLETION_INDEX)"])
    assert manifest_problems([job]) == [
        "Job j-worker: DISTCONV_WORLD_SIZE is not set; every rank would refuse to start "
        "(the Job runs 3)"
    ]


def test_a_world_size_set_again_after_env_i_is_refused_without_the_index():
    """``env -i DISTCONV_WORLD_SIZE=3``: the rank has a world size but no index, and refuses
    to start; the check compared 3 with the completions and passed the Job."""
    refused = _placed(["env", "-i", "DISTCONV_WORLD_SIZE=3"])
    assert refused.returncode != 0 and "nothing says which one this is" in refused.stderr
    job = workers_job(3, ["env", "-i", "DISTCONV_WORLD_SIZE=3"])
    assert manifest_problems([job]) == [
        "Job j-worker: DISTCONV_WORLD_SIZE '3' but the ranks' command line takes "
        "JOB_COMPLETION_INDEX from them (env -i, env -u, exec -c): every rank would refuse to start"
    ]


def test_a_world_size_of_one_set_again_after_env_i_passes_a_job_of_one():
    assert _placed(["env", "-i", "DISTCONV_WORLD_SIZE=1"]).stdout.split() == ["0", "1"]
    assert manifest_problems([workers_job(1, ["env", "-i", "DISTCONV_WORLD_SIZE=1"])]) == []
