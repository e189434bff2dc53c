"""A launcher's pair has a third variable, its local rank (``LOCAL_RANK``,
``OMPI_COMM_WORLD_LOCAL_RANK``, ``MPI_LOCALRANKID``), which placement reads beside it: it must be
an integer, agree with the Job index's own local rank (0: one rank per pod) where the rank
keeps the index, and lie in the world. ``env RANK=$(JOB_COMPLETION_INDEX) WORLD_SIZE=3
LOCAL_RANK=$(JOB_COMPLETION_INDEX)`` stops every rank but 0 ("two sources disagree"); the
check judged the pair alone and passed it.

Placement compares every source with the first it finds only (the first launcher's pair), so a
later pair's local rank is compared with the first pair's where both are set, and never with the
Job index's 0. The check judged each pair's local rank alone against the index, and two pairs
whose local ranks disagree (every rank stops) passed where the index was dropped. The local
rank the rank takes (the first set) must be 0 besides: a Job's pod runs one rank, and local
rank R serves ``--health-port`` + R, off the port its probes ask. Each verdict
is held to the pods started for real."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import trains
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(120)

_INDEX = "$(JOB_COMPLETION_INDEX)"
_PAIR = [f"RANK={_INDEX}", "WORLD_SIZE=3"]
_REFUSED = "every rank would refuse to start"
_PAIRS = [*_PAIR, f"PMI_RANK={_INDEX}", "PMI_SIZE=3"]
_DISAGREE = f"{_REFUSED} (two sources disagree about the rank)"


@pytest.mark.parametrize(
    "head",
    [
        ["env", *_PAIR, "LOCAL_RANK=0"],
        ["env", "-i", *_PAIR, "LOCAL_RANK=0"],
        ["env", f"PMI_RANK={_INDEX}", "PMI_SIZE=3", "MPI_LOCALRANKID=0"],
    ],
)
def test_a_local_rank_the_ranks_agree_with_passes(head, tmp_path):
    job = workers_job(3, head)
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
    job = workers_job(3, head)
    assert not trains(job, tmp_path)
    assert manifest_problems([job]) == [f"Job j-worker: {problem}"]


@pytest.mark.parametrize(
    ("head", "local"),
    [
        (["env", *_PAIRS, "MPI_LOCALRANKID=1"], "MPI_LOCALRANKID '1'"),
        (["env", *_PAIRS, f"MPI_LOCALRANKID={_INDEX}"], f"MPI_LOCALRANKID {_INDEX}"),
        (["env", "-i", *_PAIR, f"LOCAL_RANK={_INDEX}"], f"LOCAL_RANK {_INDEX}"),
    ],
)
def test_a_local_rank_other_than_0_is_named(head, local, tmp_path):
    """Placement accepts these (the pods place themselves), but the rank takes the local
    rank: it serves --health-port plus it, which its probes do not ask."""
    job = workers_job(3, head)
    assert trains(job, tmp_path)
    var = local.split()[0]
    assert manifest_problems([job]) == [
        f"Job j-worker: {local} gives the pod's one rank a local rank other than 0: it would "
        "serve --health-port plus it, not the port its probes ask, and train on that CUDA "
        f"device (set {var} to 0)"
    ]


@pytest.mark.parametrize(
    ("locals_", "problem"),
    [
        (["LOCAL_RANK=1", "MPI_LOCALRANKID=2"], "MPI_LOCALRANKID '2' but LOCAL_RANK '1': "),
        (
            ["LOCAL_RANK=0", f"MPI_LOCALRANKID={_INDEX}"],
            f"MPI_LOCALRANKID {_INDEX} but LOCAL_RANK '0': ",
        ),
    ],
)
def test_pairs_whose_local_ranks_disagree_are_named(locals_, problem, tmp_path):
    job = workers_job(3, ["env", "-i", *_PAIRS, *locals_])
    assert not trains(job, tmp_path)
    assert manifest_problems([job]) == [f"Job j-worker: {problem}{_DISAGREE}"]


def test_a_later_pairs_local_rank_out_of_the_world_is_named(tmp_path):
    job = workers_job(3, ["env", *_PAIRS, "MPI_LOCALRANKID=5"])
    assert not trains(job, tmp_path)
    assert manifest_problems([job]) == [
        "Job j-worker: MPI_LOCALRANKID '5' is out of range for WORLD_SIZE '3': every rank "
        "would refuse to start"
    ]
