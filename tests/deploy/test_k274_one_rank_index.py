"""An Indexed Job of one rank whose rank keeps the Job index and sees a launcher's pair of a
literal rank (``env RANK=0 WORLD_SIZE=1 distconv train``, or the pod's env): its one pod has
index 0, which the pair's rank 0 agrees with, and it trains. Since 566b29b the check said
"RANK '0' is every rank's, beside the Job index: each rank whose index is not 0 would refuse
to start", of a Job with no such rank (review k274). Each verdict is held to the pod started
for real (:mod:`index_pods`)."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import start_pod, trains
from tests.deploy.test_k256_emptied_env import _job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "head",
    [
        ["env", "RANK=0", "WORLD_SIZE=1"],
        ["env", "PMI_RANK=0", "PMI_SIZE=1"],
        ["env", "OMPI_COMM_WORLD_RANK=00", "OMPI_COMM_WORLD_SIZE=1"],
    ],
)
def test_rank_0_beside_the_index_of_a_job_of_one_passes(head, tmp_path):
    job = _job(1, head)
    assert start_pod(job, 0, tmp_path).placed == (0, 1)
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == []


def test_rank_0_in_the_pods_env_beside_the_index_passes(tmp_path):
    job = _job(1, [])
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["env"] = [
        *container["env"],
        {"name": "RANK", "value": "0"},
        {"name": "WORLD_SIZE", "value": "1"},
    ]
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == []


def test_another_rank_beside_the_index_of_a_job_of_one_is_named(tmp_path):
    job = _job(1, ["env", "RANK=1", "WORLD_SIZE=1"])
    assert not trains(job, tmp_path)
    assert manifest_problems([job]) == [
        "Job j-worker: RANK '1' is every rank's, beside the Job index: each rank whose index "
        "is not 1 would refuse to start (two sources disagree about the rank)"
    ]
