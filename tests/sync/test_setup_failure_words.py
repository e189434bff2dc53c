"""A rank that could not set up makes the job check all the same, its description naming its
error (``fail_setup``); the other ranks' check says so: ``rank 0 could not set up: ...``, not
that the ranks run different jobs (a ``name`` '<missing>' here), words the launcher reads back
as the ranks' different jobs, blaming no rank and never restarting (k617). MPI's check is run
under mpiexec in ``tests/mpi/test_fit_fails_before_setup.py``; this is the parameter server
workers' (:func:`~distconv.sync.ps.job_check.check_all_equal`), over shard 0's answers."""

from __future__ import annotations

import json

import pytest

from distconv.rank_endings import different_jobs_in
from distconv.sync.description import as_sent, digest
from distconv.sync.errors import JobRefused, setup_failure_description, setup_failure_in
from distconv.sync.ps.job_check import check_all_equal
from launcher.failure import Failure

FAILED = setup_failure_description(0, "RunDirError: runs/x already holds a run")
JOB = {"name": "mlp", "config": {"batch_size": 16}}


def _gather_of(descriptions: list[dict]):
    """Shard 0's answers to each rank's two all_equal gathers: digests, then the texts."""
    sent = [as_sent(d) for d in descriptions]

    def gather(kind: str, value):
        assert kind == "all_equal"
        if value is not None and len(value) == len(digest(sent[0])):
            return [digest(d) for d in sent]
        return [json.dumps(d, sort_keys=True) for d in sent]

    return gather


@pytest.mark.parametrize("rank", [0, 1])
def test_a_rank_that_could_not_set_up_is_named_with_its_error(rank):
    with pytest.raises(JobRefused) as raised:
        check_all_equal(_gather_of([FAILED, JOB]), rank, [FAILED, JOB][rank])
    said = str(raised.value)
    assert said == "rank 0 could not set up: RunDirError: runs/x already holds a run", said
    assert different_jobs_in([said]) is None


def test_different_jobs_are_said_as_before():
    other = {**JOB, "config": {"batch_size": 8}}
    with pytest.raises(JobRefused) as raised:
        check_all_equal(_gather_of([JOB, other]), 1, other)
    said = str(raised.value)
    assert said == "rank 1 and rank 0 run different jobs: config.batch_size: 8 here, 16 there"
    assert different_jobs_in([said]) is not None


def test_the_launcher_reads_no_mismatch_in_the_ranks_lines():
    """Rank 0's own error and rank 1's line naming it: a failure of rank 0's, which the
    launcher blames and may restart, not the ranks' different jobs (which it restarts never)."""
    told = setup_failure_in(FAILED)
    tail = [
        "distconv train: error: runs/x already holds a run",
        f"distconv train: error: {told}",
    ]
    failure = Failure("worker", 1, 1, None, "l", tail, 0)
    assert not failure.different_jobs and failure.cause is None, failure.describe()
