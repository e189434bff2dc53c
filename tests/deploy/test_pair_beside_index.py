"""An Indexed Job whose ranks keep the Job index and see a launcher's pair too (``env
RANK=$(JOB_COMPLETION_INDEX) WORLD_SIZE=2 distconv train``, or the pod's env): placement reads
both sources, and stops the rank where they disagree (``two sources disagree``: the pair's size
is not DISTCONV_WORLD_SIZE, its rank is not the pod's index) or where the pair is half set.
The check judged DISTCONV_WORLD_SIZE alone and passed every such Job, though no rank of it
starts.

A Job of one rank is the exception that agrees: its one pod has index 0, so a pair of a
literal rank 0 (``env RANK=0 WORLD_SIZE=1 distconv train``, or the pod's env) agrees with the
index and trains; the check once said "each rank whose index is not 0 would refuse to start" of
a Job with no such rank. Each verdict is held to the pods started for real."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import start_pod, trains
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(120)

_INDEX = "$(JOB_COMPLETION_INDEX)"
_REFUSED = "every rank would refuse to start"
_SIZES = f"{_REFUSED} (two sources disagree about the world size)"


def _with_flags(job: dict, flags: list[str]) -> dict:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["args"] = [*container["args"], *flags]
    return job


@pytest.mark.parametrize(
    ("head", "flags"),
    [
        ([f"RANK={_INDEX}", "WORLD_SIZE=3"], []),
        ([f"PMI_RANK={_INDEX}", "PMI_SIZE=3", f"RANK={_INDEX}", "WORLD_SIZE=3"], []),
        ([f"OMPI_COMM_WORLD_RANK={_INDEX}", "OMPI_COMM_WORLD_SIZE=3"], ["--world-size", "3"]),
    ],
)
def test_a_pair_that_agrees_with_the_index_passes(head, flags, tmp_path):
    job = _with_flags(workers_job(3, ["env", *head]), flags)
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == []


@pytest.mark.parametrize(
    ("head", "flags", "problem"),
    [
        (
            [f"RANK={_INDEX}", "WORLD_SIZE=2"],
            [],
            f"DISTCONV_WORLD_SIZE '3' but WORLD_SIZE '2': {_SIZES}",
        ),
        (
            [f"PMI_RANK={_INDEX}", "PMI_SIZE=4"],
            ["--world-size", "3"],
            f"DISTCONV_WORLD_SIZE '3' but PMI_SIZE '4': {_SIZES}",
        ),
        ([f"RANK={_INDEX}"], [], f"RANK is set but WORLD_SIZE is not: {_REFUSED}"),
        (["PMI_SIZE=3"], [], f"PMI_SIZE is set but PMI_RANK is not: {_REFUSED}"),
        (
            ["RANK=0", "WORLD_SIZE=3"],
            [],
            "RANK '0' is every rank's, beside the Job index: each rank whose index is not 0 "
            "would refuse to start (two sources disagree about the rank)",
        ),
    ],
)
def test_a_pair_that_stops_the_ranks_beside_the_index_is_named(head, flags, problem, tmp_path):
    job = _with_flags(workers_job(3, ["env", *head]), flags)
    assert not trains(job, tmp_path)
    assert "Traceback" in start_pod(job, 1, tmp_path).stderr
    assert manifest_problems([job]) == [f"Job j-worker: {problem}"]


def test_a_pair_in_the_pods_env_is_read_too(tmp_path):
    job = workers_job(3, [])
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["env"] = [*container["env"], {"name": "WORLD_SIZE", "value": "3"}]
    assert not trains(job, tmp_path)
    assert manifest_problems([job]) == [
        f"Job j-worker: WORLD_SIZE is set but RANK is not: {_REFUSED}"
    ]


@pytest.mark.timeout(60)  # one pod to start
@pytest.mark.parametrize(
    "head",
    [
        ["env", "RANK=0", "WORLD_SIZE=1"],
        ["env", "PMI_RANK=0", "PMI_SIZE=1"],
        ["env", "OMPI_COMM_WORLD_RANK=00", "OMPI_COMM_WORLD_SIZE=1"],
    ],
)
def test_rank_0_beside_the_index_of_a_job_of_one_passes(head, tmp_path):
    job = workers_job(1, head)
    assert start_pod(job, 0, tmp_path).placed == (0, 1)
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == []


@pytest.mark.timeout(60)  # one pod to start
def test_rank_0_in_the_pods_env_beside_the_index_passes(tmp_path):
    job = workers_job(1, [])
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["env"] = [
        *container["env"],
        {"name": "RANK", "value": "0"},
        {"name": "WORLD_SIZE", "value": "1"},
    ]
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == []


@pytest.mark.timeout(60)  # one pod to start
def test_another_rank_beside_the_index_of_a_job_of_one_is_named(tmp_path):
    job = workers_job(1, ["env", "RANK=1", "WORLD_SIZE=1"])
    assert not trains(job, tmp_path)
    assert manifest_problems([job]) == [
        "Job j-worker: RANK '1' is every rank's, beside the Job index: each rank whose index "
        "is not 1 would refuse to start (two sources disagree about the rank)"
    ]
