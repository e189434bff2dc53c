"""A launcher's pair has a third variable, its local rank (``LOCAL_RANK``,
``OMPI_COMM_WORLD_LOCAL_RANK``, ``MPI_LOCALRANKID``), which placement reads beside it: it must be
an integer, agree with the Job index's own local rank (0: one rank per pod) where the rank
keeps the index, and lie in the world. ``env RANK=$(JOB_COMPLETION_INDEX) WORLD_SIZE=3
LOCAL_RANK=$(JOB_COMPLETION_INDEX)`` stops every rank but 0 ("two sources disagree"); the
check judged the pair alone and passed it (review k274). Each verdict is held to the pods
started for real."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import trains
from tests.deploy.test_k256_emptied_env import _job

pytestmark = pytest.mark.timeout(120)

_INDEX = "$(JOB_COMPLETION_INDEX)"
_PAIR = [f"RANK={_INDEX}", "WORLD_SIZE=3"]
_REFUSED = "every rank would refuse to start"


@pytest.mark.parametrize(
    "head",
    [
        ["env", *_PAIR, "LOCAL_RANK=0"],
        ["env", "-i", *_PAIR, f"LOCAL_RANK={_INDEX}"],
        ["env", f"PMI_RANK={_INDEX}", "PMI_SIZE=3", "MPI_LOCALRANKID=0"],
    ],
)
def test_a_local_rank_the_ranks_agree_with_passes(head, tmp_path):
    job = _job(3, head)
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == []


@pytest.mark.parametrize(
    ("head", "problem"),
    [
        (
            ["env", *_PAIR, f"LOCAL_RANK={_INDEX}"],
            "LOCAL_RANK is each rank's index, beside the Job index, whose local rank is 0: "
            "each rank but 0 would refuse to start (two sources disagree about the rank)",
        ),
        (
            ["env", *_PAIR, "LOCAL_RANK=1"],
            "LOCAL_RANK '1' beside the Job index, whose local rank is 0: "
            f"{_REFUSED} (two sources disagree about the rank)",
        ),
        (["env", *_PAIR, "LOCAL_RANK=a"], f"LOCAL_RANK 'a' is no integer: {_REFUSED}"),
        (
            ["env", "-i", *_PAIR, "LOCAL_RANK=3"],
            f"LOCAL_RANK '3' is out of range for WORLD_SIZE '3': {_REFUSED}",
        ),
    ],
)
def test_a_local_rank_that_stops_the_ranks_is_named(head, problem, tmp_path):
    job = _job(3, head)
    assert not trains(job, tmp_path)
    assert manifest_problems([job]) == [f"Job j-worker: {problem}"]
