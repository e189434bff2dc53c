"""Bare Pods that run the ranks beside the shards were never counted: a bare Pod runs one
rank (rank 0 of 1), yet shards told ``--workers 2`` passed beside it (they would wait for a
second worker for ever), and two such Pods passed too, though each claims rank 0 of the
shards' one world. A Job's ranks were compared with the shards; a bare Pod's now are.
"""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _shards_and_pods(workers: int, pods: int) -> list[dict]:
    """The rendered shards (``--workers workers``) and ``pods`` bare Pods ``j-w<N>``, each
    running the worker Job's pod as rank 0 of 1."""
    service, shards, job = copy.deepcopy(
        render_manifests(job_name="j", workers=workers, servers=1, image="d:1")
    )
    template = job["spec"]["template"]
    env = template["spec"]["containers"][0]["env"]
    env[:] = [var for var in env if var["name"] != "DISTCONV_WORLD_SIZE"]
    return [
        service,
        shards,
        *(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {**copy.deepcopy(template["metadata"]), "name": f"j-w{n}"},
                "spec": copy.deepcopy(template["spec"]),
            }
            for n in range(pods)
        ),
    ]


def test_one_bare_pod_beside_shards_that_wait_for_two_is_named():
    problems = manifest_problems(_shards_and_pods(workers=2, pods=1))
    assert problems == ["StatefulSet j-pserver: --workers 2 but Pod j-w0 runs 1 rank"]


def test_one_bare_pod_beside_shards_that_wait_for_one_has_no_problem():
    assert manifest_problems(_shards_and_pods(workers=1, pods=1)) == []


def test_two_bare_pods_beside_the_shards_are_named():
    problems = manifest_problems(_shards_and_pods(workers=2, pods=2))
    assert problems == [
        "Pod j-w0, Pod j-w1: 2 Pods run distconv train beside the shards "
        "(StatefulSet j-pserver), whose ranks are one world: each rank would be claimed by "
        "each Pod"
    ]


def test_a_bare_pod_beside_a_jobs_ranks_is_named():
    """A bare Pod (rank 0 of 1) beside a Job's ranks was not counted with them,
    though both claim rank 0 of the shards' one world."""
    service, shards, job = copy.deepcopy(
        render_manifests(job_name="j", workers=1, servers=1, image="d:1")
    )
    (pod,) = _shards_and_pods(workers=1, pods=1)[2:]
    assert manifest_problems([service, shards, job, pod]) == [
        "Job j-worker, Pod j-w0: 2 Jobs and Pods run distconv train beside the shards "
        "(StatefulSet j-pserver), whose ranks are one world: each rank would be claimed by "
        "each of them"
    ]


@pytest.mark.parametrize("sync", ["local", "mpi"])
def test_a_bare_pod_training_through_another_transport_is_no_rank_of_the_shards(sync):
    """8494e1b counts a bare Pod's rank with a Job's, but any Pod that runs
    distconv train was counted, one of ``--sync local`` too (a baseline run beside the job),
    which never reaches the shards: the valid manifest was refused ('claimed by each of
    them'), and beside the shards alone it was compared with their --workers."""
    service, shards, job = copy.deepcopy(
        render_manifests(job_name="j", workers=1, servers=1, image="d:1")
    )
    (pod,) = _shards_and_pods(workers=1, pods=1)[2:]
    container = pod["spec"]["containers"][0]
    keep = ("--resume", "--out", "--health-port", "--health-host")
    args = container["args"]
    flags = [w for i, w in enumerate(args) if w in keep or (i and args[i - 1] in keep)]
    container["args"] = ["distconv", "train", "--sync", sync, *flags]
    container["env"] = [v for v in container["env"] if v["name"] != "DISTCONV_PSERVERS"]
    assert manifest_problems([service, shards, job, pod]) == []
    args = shards["spec"]["template"]["spec"]["containers"][0]["args"]
    args[args.index("--workers") + 1] = "2"
    assert manifest_problems([service, shards, pod]) == []
