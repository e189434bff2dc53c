"""A ``$(NAME)`` the ranks read as written, where NAME is defined only after the variable that
names it (the kubelet fills in only names defined before) or it was written ``$$(NAME)``: the
check named it "nothing the pod can see defines that variable" (DISTCONV_WORLD_SIZE, 1274a13),
false for a name defined later, or gave no reason at all (a launcher's pair, a local rank), so
the user could not tell why ``$(N)`` beside ``N: "3"`` was refused. The reason
and the fix are named; each verdict is held to the pods started for real."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import start_pod, trains
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(120)

_WHY = "(the kubelet fills in only names defined before it ($$ is $): define it earlier)"


def _job(env: list[tuple[str, str]], head: tuple[str, ...] = ()) -> dict:
    """The workers' Job of 3 behind ``head``, ``env`` in place of its ``DISTCONV_WORLD_SIZE``."""
    job = workers_job(3, list(head))
    (container,) = job["spec"]["template"]["spec"]["containers"]
    kept = [v for v in container["env"] if v["name"] != "DISTCONV_WORLD_SIZE"]
    container["env"] = [*kept, *({"name": k, "value": v} for k, v in env)]
    return job


_PAIR = ("env", "OMPI_COMM_WORLD_RANK=$(JOB_COMPLETION_INDEX)", "OMPI_COMM_WORLD_SIZE=3")


@pytest.mark.parametrize(
    ("env", "head", "problem"),
    [
        (
            [("DISTCONV_WORLD_SIZE", "$(N)"), ("N", "3")],
            (),
            "DISTCONV_WORLD_SIZE '$(N)' reaches the ranks as written, and they read it: every "
            f"rank would refuse to start {_WHY}",
        ),
        (
            [("DISTCONV_WORLD_SIZE", "$$(N)"), ("N", "3")],
            (),
            "DISTCONV_WORLD_SIZE '$(N)' reaches the ranks as written, and they read it: every "
            f"rank would refuse to start {_WHY}",
        ),
        (
            [("DISTCONV_WORLD_SIZE", "3"), ("RANK", "$(I)"), ("WORLD_SIZE", "3"), ("I", "0")],
            (),
            f"RANK '$(I)' is no integer: every rank would refuse to start {_WHY}",
        ),
        (
            [
                ("DISTCONV_WORLD_SIZE", "3"),
                ("OMPI_COMM_WORLD_LOCAL_RANK", "$(ZERO)"),
                ("ZERO", "0"),
            ],
            _PAIR,
            f"OMPI_COMM_WORLD_LOCAL_RANK '$(ZERO)' is no integer: every rank would refuse to "
            f"start {_WHY}",
        ),
    ],
)
def test_a_reference_left_as_written_says_why_and_the_fix(env, head, problem, tmp_path):
    job = _job(env, head)
    assert f"Job j-worker: {problem}" in manifest_problems([job])
    assert start_pod(job, 0, tmp_path).placed is None


def test_defined_earlier_it_passes(tmp_path):
    env = [("N", "3"), ("DISTCONV_WORLD_SIZE", "$(N)")]
    job = _job(env)
    assert manifest_problems([job]) == []
    assert trains(job, tmp_path)
