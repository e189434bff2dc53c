"""Ranks run as a StatefulSet's pods have no Job index: each places itself by its host name's
ordinal (``t-2``) only with ``DISTCONV_RANK_FROM_HOSTNAME`` on, in a world of
``DISTCONV_WORLD_SIZE``, which must be the replicas; otherwise each pod is rank 0 of 1, which
refuses a ``DISTCONV_WORLD_SIZE`` above 1 and, without one, trains alone. The check judged the
placement of Jobs' ranks only and passed every such StatefulSet (review k287). Each verdict is
held to :func:`distconv.runtime.detect_runtime` run on each pod's environment and host name."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.placement import RuntimeConfigError
from distconv.runtime import detect_runtime
from tests.deploy.job_shapes import kubernetes_doc_text

pytestmark = pytest.mark.timeout(60)


def _sts(replicas: int, env: dict[str, str]) -> list[dict]:
    """The rendered shards and Service, and the workers' pods as StatefulSet ``j-worker`` of
    ``replicas``, their ``DISTCONV_WORLD_SIZE`` and ``DISTCONV_RANK_FROM_HOSTNAME`` ``env``
    (a name left out is unset)."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=replicas, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    (shards,) = [o for o in objs if o["kind"] == "StatefulSet"]
    template = job["spec"]["template"]
    template["spec"]["restartPolicy"] = "Always"
    template["metadata"]["labels"] = labels = dict(shards["spec"]["selector"]["matchLabels"])
    labels["app.kubernetes.io/component"] = "worker"
    (container,) = template["spec"]["containers"]
    names = {"DISTCONV_WORLD_SIZE", "DISTCONV_RANK_FROM_HOSTNAME"}
    kept = [v for v in container["env"] if v["name"] not in names]
    container["env"] = [*kept, *({"name": k, "value": v} for k, v in env.items())]
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {**job["metadata"]},
        "spec": {
            "serviceName": shards["spec"]["serviceName"],
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": template,
        },
    }
    return [o for o in objs if o is not job] + [sts]


def _places(replicas: int, env: dict[str, str]) -> bool:
    """Whether the pods j-worker-0.. each place themselves as their own rank of ``replicas``."""
    placed = []
    for ordinal in range(replicas):
        try:
            runtime = detect_runtime(environ=env, hostname=f"j-worker-{ordinal}")
        except RuntimeConfigError:
            return False
        placed.append((runtime.rank, runtime.world_size))
    return placed == [(r, replicas) for r in range(replicas)]


@pytest.mark.parametrize(
    ("replicas", "env", "problem"),
    [
        (
            3,
            {"DISTCONV_WORLD_SIZE": "3"},
            "its 3 pods' ranks take no rank from their host names (DISTCONV_RANK_FROM_HOSTNAME "
            "is not on): each would refuse to start",
        ),
        (
            3,
            {},
            "its 3 pods' ranks take no rank from their host names (DISTCONV_RANK_FROM_HOSTNAME "
            "is not on): each would train alone as rank 0 of 1",
        ),
        (
            3,
            {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "4"},
            "DISTCONV_WORLD_SIZE '4' but its 3 replicas are one rank each: the ranks would wait "
            "for ranks that never start, or refuse to start (out of range)",
        ),
        (
            3,
            {"DISTCONV_RANK_FROM_HOSTNAME": "1"},
            "DISTCONV_RANK_FROM_HOSTNAME is on but DISTCONV_WORLD_SIZE is not set: every rank "
            "would refuse to start",
        ),
    ],
)
def test_ranks_a_statefulset_does_not_place_are_named(replicas, env, problem):
    assert not _places(replicas, env)
    fix = (
        " (set DISTCONV_RANK_FROM_HOSTNAME=1 and DISTCONV_WORLD_SIZE to the replicas, or run "
        "the ranks as an Indexed Job)"
    )
    assert f"StatefulSet j-worker: {problem}{fix}" in manifest_problems(_sts(replicas, env))


@pytest.mark.parametrize(
    ("replicas", "env"),
    [
        (3, {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "3"}),
        (2, {"DISTCONV_RANK_FROM_HOSTNAME": "on", "DISTCONV_WORLD_SIZE": "02"}),
        (1, {}),
    ],
)
def test_ranks_a_statefulset_places_pass(replicas, env):
    """(The StatefulSet names the shards' Service, whose selector is not its pods': named
    alone, as the StatefulSet is no rendered shape.)"""
    assert _places(replicas, env)
    problems = manifest_problems(_sts(replicas, env))
    assert not [p for p in problems if "DISTCONV_" in p or "host name" in p], problems


def test_the_docs_say_so():
    text = kubernetes_doc_text()
    assert "Ranks run as a StatefulSet's pods place themselves by their host name's" in text
