"""A Job that is not Indexed runs one pod, whose rank has no index; a launcher's pair its
command line sets (``env RANK=0 WORLD_SIZE=2 distconv train``) places it. The check judged
only DISTCONV_WORLD_SIZE there: a pair of world 2 (the rank waits for a rank 1 that never
starts) or half a pair (the rank refuses to start) passed, and a DISTCONV_WORLD_SIZE 2 beside
``RANK=0 WORLD_SIZE=2`` was said to make the rank refuse to start, which it does not (it
waits). What the pair says is judged now, as in an Indexed Job whose ranks lose the index.
Each verdict is held to the pod started for real."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import start_pod, trains
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(60)

_REFUSED = "every rank would refuse to start"


def _one_pod(head: list[str], size: str | None) -> dict:
    """The workers' Job of one pod, not Indexed, its rank behind ``head`` with
    DISTCONV_WORLD_SIZE ``size`` (None: not set)."""
    job = workers_job(1, head)
    del job["spec"]["completionMode"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = [v for v in container["env"] if v["name"] != "DISTCONV_WORLD_SIZE"]
    container["env"] = (
        env if size is None else [*env, {"name": "DISTCONV_WORLD_SIZE", "value": size}]
    )
    return job


@pytest.mark.parametrize("size", [None, "1"])
def test_a_pair_of_rank_0_of_1_passes(size, tmp_path):
    job = _one_pod(["env", "RANK=0", "WORLD_SIZE=1"], size)
    assert start_pod(job, 0, tmp_path).placed == (0, 1)
    assert manifest_problems([job]) == []


@pytest.mark.parametrize(
    ("head", "size", "placed", "problem"),
    [
        (
            ["RANK=0", "WORLD_SIZE=2"],
            None,
            (0, 2),
            "WORLD_SIZE '2' but the Job is not Indexed: it runs 1 rank",
        ),
        (
            ["RANK=0", "WORLD_SIZE=2"],
            "2",
            (0, 2),
            "WORLD_SIZE '2' but the Job is not Indexed: it runs 1 rank",
        ),
        (["RANK=0"], None, None, f"RANK is set but WORLD_SIZE is not: {_REFUSED}"),
        (
            ["RANK=0", "WORLD_SIZE=1"],
            "2",
            None,
            f"DISTCONV_WORLD_SIZE '2' but WORLD_SIZE '1': {_REFUSED} (two sources disagree "
            "about the world size)",
        ),
    ],
)
def test_what_a_pair_in_a_job_of_one_pod_says_is_judged(head, size, placed, problem, tmp_path):
    job = _one_pod(["env", *head], size)
    assert start_pod(job, 0, tmp_path).placed == placed
    assert not trains(job, tmp_path)
    assert manifest_problems([job]) == [f"Job j-worker: {problem}"]
