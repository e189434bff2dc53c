"""A pair whose value holds a ``$(JOB_COMPLETION_INDEX)`` the kubelet leaves as written: the
rank reads that text, no integer, and refuses to start. The kubelet fills the index in only
on the command line of an Indexed Job's pods; the Job controller adds the variable after the
pod's own env (kubernetes#121523), so ``RANK: $(JOB_COMPLETION_INDEX)`` in the pod's env is
not filled in; ``$$(...)`` is a literal ``$(...)``; a Job that is not Indexed has no such
variable. The check took each for the pod's index, or left it unjudged, and passed Jobs no
rank of which starts. Each verdict is held to the pods started for real."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import start_pod, trains
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(120)

_INDEX = "$(JOB_COMPLETION_INDEX)"
_LEFT = (
    "is no integer: every rank would refuse to start (the kubelet fills in "
    "$(JOB_COMPLETION_INDEX) only on the command line of an Indexed Job's pods)"
)


def _pod_env(job: dict, **values: str) -> dict:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["env"] = [*container["env"], *({"name": k, "value": v} for k, v in values.items())]
    return job


def _refused(job: dict, problem: str, tmp_path) -> None:
    assert "must be an integer" in start_pod(job, 0, tmp_path).stderr
    assert not trains(job, tmp_path)
    assert manifest_problems([job]) == [f"Job j-worker: {problem}"]


def test_the_index_in_the_pods_env_is_left_as_written(tmp_path):
    job = _pod_env(workers_job(3, []), RANK=_INDEX, WORLD_SIZE="3")
    _refused(job, f"RANK '{_INDEX}' {_LEFT}", tmp_path)


def test_a_variable_holding_the_index_is_filled_in_as_written(tmp_path):
    job = _pod_env(workers_job(3, ["env", "RANK=$(R)", "WORLD_SIZE=3"]), R=_INDEX)
    _refused(job, f"RANK '{_INDEX}' {_LEFT}", tmp_path)


def test_an_escaped_index_is_no_index(tmp_path):
    job = workers_job(3, ["env", "RANK=$$(JOB_COMPLETION_INDEX)", "WORLD_SIZE=3"])
    _refused(job, f"RANK '{_INDEX}' {_LEFT}", tmp_path)


def test_a_job_that_is_not_indexed_has_no_index_to_fill_in(tmp_path):
    job = workers_job(1, ["env", f"RANK={_INDEX}", "WORLD_SIZE=1"])
    del job["spec"]["completionMode"]
    _refused(job, f"RANK '{_INDEX}' {_LEFT}", tmp_path)


@pytest.mark.parametrize(
    "head",
    [
        ["env", f"RANK={_INDEX}", "WORLD_SIZE=3"],
        ["env", "-i", f"RANK={_INDEX}", "WORLD_SIZE=3"],
        ["env", f"RANK= {_INDEX}", "WORLD_SIZE=3"],
    ],
)
def test_the_index_on_an_indexed_jobs_command_line_is_filled_in(head, tmp_path):
    job = workers_job(3, head)
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == []


def test_more_around_the_index_on_the_command_line_is_each_pods_own(tmp_path):
    """``RANK=0$(JOB_COMPLETION_INDEX)``: 00, 01, 02, which only each pod knows: not judged."""
    job = workers_job(3, ["env", f"RANK=0{_INDEX}", "WORLD_SIZE=3"])
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == []
