"""An Indexed Job runs min(parallelism, completions still to run) pods at once: a parallelism
above completions runs every rank at once, as the ranks need, and the API server takes it. The
check asked for parallelism equal to completions and refused such a Job, which trains;
a parallelism below completions (ranks that wait for ranks never started) is still
named, as is 0 (no pod runs)."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import trains
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(60)


def _parallel(parallelism: int) -> dict:
    job = workers_job(3, [])
    job["spec"]["parallelism"] = parallelism
    return job


@pytest.mark.parametrize("parallelism", [3, 5])
def test_every_rank_at_once_passes(parallelism, tmp_path):
    job = _parallel(parallelism)
    assert trains(job, tmp_path)  # the Job's 3 pods, each its own rank of 3
    assert manifest_problems([job]) == []


@pytest.mark.parametrize("parallelism", [2, 0])
def test_ranks_that_wait_for_others_are_named(parallelism):
    assert manifest_problems([_parallel(parallelism)]) == [
        f"Job j-worker: parallelism {parallelism} is below completions 3: the ranks started "
        "would wait for ranks that start only after them (all ranks run at once)"
    ]


def test_a_job_of_one_rank_with_no_parallelism_passes(tmp_path):
    job = workers_job(1, [])
    del job["spec"]["parallelism"]  # the API server's default: 1, every rank of 1
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == []
