"""An Indexed Job whose ranks' command line takes JOB_COMPLETION_INDEX from them (``env -i``,
``env -u JOB_COMPLETION_INDEX``) but sets a launcher's pair itself (``RANK=$(JOB_COMPLETION_INDEX)
WORLD_SIZE=3``, ``PMI_RANK``/``PMI_SIZE``, ``OMPI_COMM_WORLD_RANK``/``OMPI_COMM_WORLD_SIZE``):
each rank is placed by the pair (:func:`distconv.placement.from_environment` reads it) and
trains. Since f9aeb0d and 17c0909 the check said every rank would train as rank 0 of 1, or
refuse to start for its DISTCONV_WORLD_SIZE. What the pair says is judged: its size against
completions, a DISTCONV_WORLD_SIZE beside it that differs, one of the pair alone, one rank
for every pod. Each verdict is held to the pods started for real (:mod:`index_pods`)."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import start_pod, trains
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(120)

_INDEX = "$(JOB_COMPLETION_INDEX)"
_REFUSED = "every rank would refuse to start"


def _shell_job(workers: int, head: str) -> dict:
    """The workers' Job whose ranks run ``sh -c "HEAD /opt/venv/bin/distconv train ..."``."""
    job = workers_job(workers, [])
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["command"] = ["sh", "-c", " ".join([head, *container.pop("args")])]
    return job


def _agree(job: dict, problems: list[str], tmp_path) -> None:
    """The check passes ``job`` exactly where its pods all start, each its own rank."""
    assert (problems == []) == bool(trains(job, tmp_path)), problems


@pytest.mark.parametrize(
    "head",
    [
        ["env", "-i", f"RANK={_INDEX}", "WORLD_SIZE=3"],
        ["env", "-i", f"PMI_RANK={_INDEX}", "PMI_SIZE=3"],
        ["env", "-i", f"OMPI_COMM_WORLD_RANK={_INDEX}", "OMPI_COMM_WORLD_SIZE=3"],
        ["env", "-i", f"RANK={_INDEX}", "WORLD_SIZE=3", "DISTCONV_WORLD_SIZE=3"],
        ["env", "-i", f"RANK={_INDEX}", "WORLD_SIZE=3", f"PMI_RANK={_INDEX}", "PMI_SIZE=3"],
        # the pod's DISTCONV_WORLD_SIZE (3) kept beside the pair, which agrees with it
        ["env", "-u", "JOB_COMPLETION_INDEX", f"RANK={_INDEX}", "WORLD_SIZE=3"],
    ],
)
def test_ranks_placed_by_a_pair_without_the_index_pass(head, tmp_path):
    job = workers_job(3, head)
    assert trains(job, tmp_path)
    assert start_pod(job, 2, tmp_path).placed == (2, 3)
    assert manifest_problems([job]) == []


def test_a_pair_in_a_shell_string_passes(tmp_path):
    job = _shell_job(3, "exec env -i RANK=$JOB_COMPLETION_INDEX WORLD_SIZE=3")
    problems = manifest_problems([job])
    assert problems == []
    _agree(job, problems, tmp_path)


@pytest.mark.parametrize(
    ("head", "problem"),
    [
        (["RANK=" + _INDEX, "WORLD_SIZE=2"], "WORLD_SIZE '2' != completions 3"),
        (["PMI_RANK=" + _INDEX, "PMI_SIZE=4"], "PMI_SIZE '4' != completions 3"),
        (
            ["RANK=" + _INDEX, "WORLD_SIZE=3", "DISTCONV_WORLD_SIZE=2"],
            f"DISTCONV_WORLD_SIZE '2' but WORLD_SIZE '3': {_REFUSED} (two sources disagree "
            "about the world size)",
        ),
        (["RANK=" + _INDEX], f"RANK is set but WORLD_SIZE is not: {_REFUSED}"),
        (
            ["OMPI_COMM_WORLD_SIZE=3"],
            f"OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not: {_REFUSED}",
        ),
        (
            ["RANK=0", "WORLD_SIZE=3"],
            "RANK '0' is every rank's: the Job's 3 ranks would all claim it (each takes its own "
            "from $(JOB_COMPLETION_INDEX))",
        ),
        (["RANK=" + _INDEX, "WORLD_SIZE=three"], f"WORLD_SIZE 'three' is no integer: {_REFUSED}"),
    ],
)
def test_what_a_pair_without_the_index_says_is_judged(head, problem, tmp_path):
    job = workers_job(3, ["env", "-i", *head])
    problems = manifest_problems([job])
    assert problems == [f"Job j-worker: {problem}"]
    _agree(job, problems, tmp_path)


def test_a_literal_rank_in_a_read_shell_string_is_judged(tmp_path):
    job = _shell_job(3, "exec env -i RANK=0 WORLD_SIZE=3")
    problems = manifest_problems([job])
    assert problems == [
        "Job j-worker: RANK '0' is every rank's: the Job's 3 ranks would all claim it (each "
        "takes its own from $(JOB_COMPLETION_INDEX))"
    ]
    _agree(job, problems, tmp_path)


@pytest.mark.parametrize(("rank", "passes"), [("0", True), ("1", False)])
def test_a_job_of_one_takes_rank_0_of_a_pair(rank, passes, tmp_path):
    job = workers_job(1, ["env", "-i", f"RANK={rank}", "WORLD_SIZE=1"])
    problems = manifest_problems([job])
    assert (problems == []) is passes, problems
    _agree(job, problems, tmp_path)
