"""A Job's (or StatefulSet's) pod is one rank: two containers that run ``distconv train`` in it
see the same ``JOB_COMPLETION_INDEX`` (or none: rank 0 of 1; or host name) and the same
``DISTCONV_WORLD_SIZE``, so both claim the pod's rank, and the job never has its world. The
check judged each container alone and passed the pod (a StatefulSet's for a while longer than
a Job's). The verdict is held to the containers started for real, each as the kubelet
starts it in the pod."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems
from distconv.runtime import detect_runtime
from tests.deploy.index_pods import start_pod
from tests.deploy.job_shapes import workers_job
from tests.deploy.test_rank_checks_stateful_ranks import _sts
from tests.deploy.test_sidecars import LOGGER

pytestmark = pytest.mark.timeout(120)


def _two_trainers(workers: int, indexed: bool = True) -> dict:
    """The workers' Job of ``workers`` whose pod runs its rank's container twice."""
    job = workers_job(workers, [])
    containers = job["spec"]["template"]["spec"]["containers"]
    containers.append({**copy.deepcopy(containers[0]), "name": "worker-2"})
    if not indexed:
        del job["spec"]["completionMode"]
    return job


def _alone(job: dict, at: int) -> dict:
    """``job`` with only its container ``at`` (how index_pods starts one)."""
    job = copy.deepcopy(job)
    spec = job["spec"]["template"]["spec"]
    spec["containers"] = [spec["containers"][at]]
    return job


@pytest.mark.parametrize(("workers", "indexed"), [(3, True), (1, False)])
def test_two_ranks_in_one_pod_are_named(workers, indexed, tmp_path):
    job = _two_trainers(workers, indexed)
    for index in range(workers):  # both containers of each pod claim the pod's one rank
        placed = [start_pod(_alone(job, at), index, tmp_path).placed for at in (0, 1)]
        assert placed == [(index, workers)] * 2
    assert manifest_problems([job]) == [
        "Job j-worker: 2 containers (worker, worker-2) run distconv train in each pod, which is "
        "one rank: they would claim the same rank (each pod runs one rank)"
    ]


def test_a_sidecar_beside_the_rank_passes():
    job = workers_job(3, [])
    job["spec"]["template"]["spec"]["containers"].append(dict(LOGGER))
    assert manifest_problems([job]) == []


def test_two_ranks_in_a_statefulsets_pod_are_named():
    """Both containers of pod j-worker-1 (one env, one host name) take its rank, 1 of 2."""
    env = {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "2"}
    assert detect_runtime(environ=env, hostname="j-worker-1").rank == 1
    objs = _sts(2, env)
    containers = objs[-1]["spec"]["template"]["spec"]["containers"]
    containers.append({**copy.deepcopy(containers[0]), "name": "worker-2"})
    assert (
        "StatefulSet j-worker: 2 containers (worker, worker-2) run distconv train in each pod, "
        "which is one rank: they would claim the same rank (each pod runs one rank)"
    ) in manifest_problems(objs)


def test_a_sidecar_beside_a_statefulsets_rank_passes():
    objs = _sts(2, {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "2"})
    objs[-1]["spec"]["template"]["spec"]["containers"].append(dict(LOGGER))
    assert not [p for p in manifest_problems(objs) if "rank" in p]


def _bare_pod(*containers: dict) -> dict:
    """The workers' Job's pod of one rank as bare Pod ``p`` (restartPolicy Never), with
    ``containers`` after the rank's."""
    spec = copy.deepcopy(workers_job(1, [])["spec"]["template"]["spec"])
    spec["containers"] += containers
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def test_two_ranks_in_a_bare_pod_are_named():
    """Both containers of one bare Pod place themselves as rank 0 of 1."""
    pod = _bare_pod()
    pod["spec"]["containers"].append({**pod["spec"]["containers"][0], "name": "worker-2"})
    assert [detect_runtime(environ={}, hostname="p").rank] * 2 == [0, 0]
    assert (
        "Pod p: 2 containers (worker, worker-2) run distconv train in each pod, which is one "
        "rank: they would claim the same rank (each pod runs one rank)"
    ) in manifest_problems([pod])
    beside = _bare_pod(dict(LOGGER))  # a sidecar beside the rank
    assert not [p for p in manifest_problems([beside]) if "rank" in p]
