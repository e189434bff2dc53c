"""Two launchers' pairs a rank sees must say the same rank and world size: placement compares
every pair with the first and stops the rank where they differ ("two sources disagree"). The
check compared each pair alone with the Job index, DISTCONV_WORLD_SIZE or completions only, so
where the ranks give ``--rank`` (the pairs' ranks not judged) or ``--world-size`` (their sizes
not judged) and the index is dropped, two pairs that disagree passed. Each verdict
is held to the pods started for real."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import trains
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(120)

_INDEX = "$(JOB_COMPLETION_INDEX)"
_PAIR = [f"RANK={_INDEX}", "WORLD_SIZE=3"]
_RANK = "(two sources disagree about the rank)"


def _flagged(head: list[str], *flags: str) -> dict:
    """The workers' Job of 3 whose ranks start behind ``head`` and give ``flags``."""
    job = workers_job(3, head)
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["args"] = [*container["args"], *flags]
    return job


@pytest.mark.parametrize(
    ("pair", "flags", "problem"),
    [
        (
            ["OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=3"],
            ("--rank", _INDEX),
            f"OMPI_COMM_WORLD_RANK '1' but RANK {_INDEX}: the ranks would refuse to start {_RANK}",
        ),
        (
            [f"OMPI_COMM_WORLD_RANK={_INDEX}", "OMPI_COMM_WORLD_SIZE=4"],
            ("--world-size", "3"),
            "OMPI_COMM_WORLD_SIZE '4' but WORLD_SIZE '3': every rank would refuse to start "
            "(two sources disagree about the world size)",
        ),
        (
            [f"PMI_RANK={_INDEX}", "PMI_SIZE=4"],
            ("--rank", _INDEX),
            "PMI_SIZE '4' but WORLD_SIZE '3': every rank would refuse to start (two sources "
            "disagree about the world size)",
        ),
    ],
)
def test_two_pairs_that_disagree_are_named_both(pair, flags, problem, tmp_path):
    job = _flagged(["env", "-i", *_PAIR, *pair], *flags)
    assert not trains(job, tmp_path)
    assert manifest_problems([job]) == [f"Job j-worker: {problem}"]


@pytest.mark.parametrize("flags", [("--rank", _INDEX), ("--world-size", "3"), ()])
def test_two_pairs_that_agree_pass(flags, tmp_path):
    pair = [f"PMI_RANK={_INDEX}", " PMI_SIZE=03"]
    job = _flagged(["env", "-i", *_PAIR, *(p.strip() for p in pair)], *flags)
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == []
