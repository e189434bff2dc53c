"""Ranks run as a Deployment's, ReplicaSet's, ReplicationController's or DaemonSet's pods:
their pods share one env and are named ``<name>-<hash>-<random>`` (no Job index, no ordinal),
so every pod takes the same rank, and each is started again when its rank finishes. The rank
checks judged Jobs', MPIJobs' and StatefulSets' ranks only, and passed these whatever placed
them (review k287, k293)."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.placement import RuntimeConfigError
from distconv.runtime import detect_runtime
from tests.deploy.job_shapes import kubernetes_doc_text

pytestmark = pytest.mark.timeout(60)

_KINDS = ("Deployment", "ReplicaSet", "ReplicationController", "DaemonSet")


def _workers_as(kind: str, replicas: int, init: bool = False) -> list[dict]:
    """The rendered manifests of 1 shard, the workers' pods run by a ``kind`` of ``replicas``
    (with ``init``: the ranks' container is an init container, a main one sleeps)."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=replicas, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    template = job["spec"]["template"]
    template["spec"]["restartPolicy"] = "Always"
    if init:
        (rank,) = template["spec"]["containers"]
        template["spec"]["initContainers"] = [rank]
        template["spec"]["containers"] = [{**rank, "name": "idle", "args": ["sleep", "inf"]}]
    spec = {"replicas": replicas, "selector": {"matchLabels": {}}, "template": template}
    if kind == "DaemonSet":
        del spec["replicas"]
    controller = {"apiVersion": "apps/v1", "kind": kind, "metadata": job["metadata"], "spec": spec}
    return [o for o in objs if o is not job] + [controller]


def _problem(kind: str) -> str:
    return (
        f"{kind} j-worker: runs distconv train, but a {kind}'s pods have no Job index nor "
        "ordinal to take a rank from, and each is started again when its rank finishes (run "
        "the ranks as an Indexed Job)"
    )


@pytest.mark.parametrize("replicas", [1, 3])
@pytest.mark.parametrize("kind", _KINDS)
def test_ranks_a_restarting_controller_runs_are_refused(kind, replicas):
    assert _problem(kind) in manifest_problems(_workers_as(kind, replicas))


def test_each_pod_would_take_the_same_rank():
    """Two pods of a Deployment, as detect_runtime places them: the same rank, even with the
    host-name switch (a random suffix is no ordinal)."""
    env = {"DISTCONV_WORLD_SIZE": "2", "DISTCONV_RANK_FROM_HOSTNAME": "1"}
    for host in ("j-worker-7d9c5b8f6-x2k9q", "j-worker-7d9c5b8f6-p4r8z"):
        with pytest.raises(RuntimeConfigError, match="does not end in -<ordinal>"):
            detect_runtime(environ=env, hostname=host)
    placed = {detect_runtime(environ={}, hostname=h).rank for h in ("a-1-x", "a-1-y")}
    assert placed == {0}


@pytest.mark.parametrize("kind", _KINDS)
def test_an_init_container_that_runs_train_is_not_a_rank(kind):
    """(An init container runs to completion: it is not the pods' rank.)"""
    assert _problem(kind) not in manifest_problems(_workers_as(kind, 2, init=True))


def test_rendered_manifests_are_not_refused():
    for workers, servers in ((3, 2), (4, 0), (1, 1)):
        objs = render_manifests(job_name="j", workers=workers, servers=servers, image="d:1")
        assert manifest_problems(objs) == []


def test_the_docs_say_so():
    text = kubernetes_doc_text()
    assert (
        "Ranks run as a Deployment's, ReplicaSet's, ReplicationController's or DaemonSet's" in text
    )
