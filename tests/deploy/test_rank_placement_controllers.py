"""Ranks run as a Deployment's, ReplicaSet's, ReplicationController's or DaemonSet's pods:
their pods share one env and are named ``<name>-<hash>-<random>`` (no Job index, no ordinal),
so every pod takes the same rank, and each is started again when its rank finishes. A bare Pod
runs one rank, which must place itself as rank 0 of 1 and not be started again when it
finishes (restartPolicy Always, the default). The rank checks judged Jobs', MPIJobs' and
StatefulSets' ranks only and passed these whatever placed them; no check walked bare Pods at
all."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.placement import RuntimeConfigError
from distconv.runtime import detect_runtime
from tests.deploy.job_shapes import kubernetes_doc_text, workers_job

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
    assert "A bare Pod that runs `distconv train` runs one rank" in text


def _bare_pod(env: dict[str, str], policy: str | None = "Never") -> list[dict]:
    """The rendered workers' pod of a Job of 1 as bare Pod ``p`` (its rank training alone),
    ``env`` where its ``DISTCONV_WORLD_SIZE`` was, its restartPolicy ``policy`` (None: unset)."""
    job = workers_job(1, [])
    spec = copy.deepcopy(job["spec"]["template"]["spec"])
    (container,) = spec["containers"]
    kept = [v for v in container["env"] if v["name"] != "DISTCONV_WORLD_SIZE"]
    container["env"] = [*kept, *({"name": k, "value": v} for k, v in env.items())]
    spec.pop("restartPolicy", None)
    if policy is not None:
        spec["restartPolicy"] = policy
    metadata = {"name": "p", "labels": dict(job["spec"]["template"]["metadata"]["labels"])}
    return [{"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}]


def _pod_places(objs: list[dict]) -> bool:
    """Whether the bare Pod's rank places itself as rank 0 of 1 with local rank 0."""
    (container,) = objs[0]["spec"]["containers"]
    env = {v["name"]: v["value"] for v in container["env"] if "value" in v}
    try:
        runtime = detect_runtime(environ=env, hostname="p")
    except RuntimeConfigError:
        return False
    return (runtime.rank, runtime.world_size, runtime.local_rank) == (0, 1, 0)


_ONE = " (a bare Pod runs one rank: rank 0 of 1)"


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        (
            {"DISTCONV_WORLD_SIZE": "3"},
            "pod p's rank would refuse to start: DISTCONV_WORLD_SIZE=3 says the job has 3 "
            "workers, but nothing says which one this is (no --rank, RANK, MPI rank or "
            "JOB_COMPLETION_INDEX, and DISTCONV_RANK_FROM_HOSTNAME is off): alone it would "
            "train as rank 0 of 1",
        ),
        (
            {"RANK": "1", "WORLD_SIZE": "2"},
            "the ranks would take (p: rank 1 of 2), not each pod its own of 1, local rank 0",
        ),
    ],
)
def test_a_bare_pods_rank_is_placed(env, problem):
    objs = _bare_pod(env)
    assert not _pod_places(objs)
    assert f"Pod p: {problem}{_ONE}" in manifest_problems(objs)


@pytest.mark.parametrize(("policy", "shown"), [("Always", "'Always'"), (None, "'Always' (unset)")])
def test_a_bare_pod_that_restarts_its_rank_is_refused(policy, shown):
    assert manifest_problems(_bare_pod({}, policy)) == [
        f"Pod p: restartPolicy must be Never or OnFailure, got {shown}: its rank would be "
        "started again each time it finishes"
    ]


@pytest.mark.parametrize(
    "env", [{}, {"DISTCONV_WORLD_SIZE": "1"}, {"RANK": "0", "WORLD_SIZE": "1"}]
)
def test_a_bare_pod_of_one_rank_passes(env):
    objs = _bare_pod(env, "OnFailure")
    assert _pod_places(objs)
    assert manifest_problems(objs) == []


def test_a_pod_without_metadata_or_spec_is_named_not_a_crash():
    rank = {"name": "c", "args": ["/opt/venv/bin/distconv", "train"]}
    assert not [p for p in manifest_problems([{"kind": "Pod"}]) if "rank" in p]
    problems = manifest_problems([{"kind": "Pod", "spec": {"containers": [rank]}}])
    assert problems[0].startswith("Pod ?: restartPolicy must be Never or OnFailure"), problems
