"""A rank's local rank must lie in its world (:func:`distconv.runtime._check_ranges`), which is
``--world-size`` where the ranks give it: the flag wins over the launcher's pair's size. The
check held the local rank to the pair's size: ``LOCAL_RANK=3`` beside ``WORLD_SIZE=4`` and
``--world-size 3`` passed though every rank stops, and ``LOCAL_RANK=2`` beside ``WORLD_SIZE=2``
and ``--world-size 3`` was refused as out of range though every rank places itself;
it is refused still, but for what a local rank other than 0 does in a Job's one-rank pod.
Each verdict is held to the pods started for real."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.index_pods import start_pod, trains
from tests.deploy.job_shapes import workers_job

pytestmark = pytest.mark.timeout(120)

_INDEX = "$(JOB_COMPLETION_INDEX)"


def _flagged(size: str, local: str, world: str) -> dict:
    """The workers' Job of 3 whose ranks see (only) ``RANK``/``WORLD_SIZE`` ``size`` and
    ``LOCAL_RANK`` ``local`` and give ``--world-size world``."""
    job = workers_job(
        3, ["env", "-i", f"RANK={_INDEX}", f"WORLD_SIZE={size}", f"LOCAL_RANK={local}"]
    )
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["args"] = [*container["args"], "--world-size", world]
    return job


def test_a_local_rank_out_of_the_flags_world_is_named(tmp_path):
    job = _flagged("4", "3", "3")
    started = start_pod(job, 0, tmp_path)
    assert started.returncode != 0 and "local rank 3 is out of range" in started.stderr
    assert manifest_problems([job]) == [
        "Job j-worker: LOCAL_RANK '3' is out of range for --world-size 3: every rank would "
        "refuse to start"
    ]


#: a local rank of 2 is in the world, but not 0, which the pod's one rank needs
_NOT_ZERO = (
    "Job j-worker: LOCAL_RANK '2' gives the pod's one rank a local rank other than 0: it would "
    "serve --health-port plus it, not the port its probes ask, and train on that CUDA device "
    "(set LOCAL_RANK to 0)"
)


def test_a_local_rank_in_the_flags_world_is_not_out_of_range(tmp_path):
    job = _flagged("2", "2", "3")
    assert start_pod(job, 1, tmp_path).placed == (1, 3)
    assert trains(job, tmp_path)
    assert manifest_problems([job]) == [_NOT_ZERO]


@pytest.mark.parametrize(("local", "problems"), [("0", []), ("2", [_NOT_ZERO])])
def test_a_world_the_cluster_fills_in_is_not_judged(local, problems):
    job = _flagged("2", local, "$(WORLD)")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    container["env"].append({"name": "WORLD", "valueFrom": {"fieldRef": {"fieldPath": "x"}}})
    assert manifest_problems([job]) == problems
