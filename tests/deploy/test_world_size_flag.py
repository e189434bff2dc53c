"""An Indexed Job whose ranks give ``--world-size N`` (no ``--rank``) and keep the Job index:
:func:`distconv.runtime._placement` takes the rank from the index and the world from the flag,
which wins over DISTCONV_WORLD_SIZE silently (the variable is read, as the index needs it set
and an integer, but never compared with the flag). The check compared the variable with
completions, and refused a Job of 3 given ``--world-size 3`` beside a DISTCONV_WORLD_SIZE of 5,
which trains; it judges the flag's world now (_pod_settings compares it with completions) and
the variable only as the index reads it. Each verdict is held to the pods started for real."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import start_pod, trains
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(120)


def _flagged(world: str, size: str | None, head: list[str] | None = None) -> dict:
    """The workers' Job of 3 whose ranks give ``--world-size world`` beside
    DISTCONV_WORLD_SIZE ``size`` (None: not set)."""
    job = workers_job(3, head or [])
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["args"] = [*container["args"], "--world-size", world]
    env = [v for v in container["env"] if v["name"] != "DISTCONV_WORLD_SIZE"]
    container["env"] = (
        env if size is None else [*env, {"name": "DISTCONV_WORLD_SIZE", "value": size}]
    )
    return job


@pytest.mark.parametrize("size", ["5", "1", "3"])
def test_the_flag_is_the_world_whatever_the_variable_says(size, tmp_path):
    job = _flagged("3", size)
    assert start_pod(job, 2, tmp_path).placed == (2, 3)
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == []


@pytest.mark.parametrize(
    ("world", "size", "problem"),
    [
        ("2", "3", "Job j-worker container worker: --world-size 2 but Job j-worker runs 3 ranks"),
        (
            "3",
            None,
            "Job j-worker: DISTCONV_WORLD_SIZE is not set; every rank would refuse to start (the "
            "Job runs 3)",
        ),
        (
            "3",
            "three",
            "Job j-worker: DISTCONV_WORLD_SIZE 'three' is no integer: every rank would refuse to "
            "start",
        ),
    ],
)
def test_what_stops_ranks_given_the_flag_is_named(world, size, problem, tmp_path):
    job = _flagged(world, size)
    assert not trains(job, tmp_path)
    assert manifest_problems([job]) == [problem]
