"""Objects named by ``metadata.generateName`` (the API server appends five random characters):
a shards' StatefulSet so named stopped the check with ``KeyError: 'name'``; a StatefulSet's or
a bare Pod's ranks were placed, and named, as the pods of ``None`` (``pod None-0``), a name
their pods never have. The pods' names are now the prefix and a stand-in for the random part,
and each verdict is held to :func:`distconv.runtime.detect_runtime` on such a name."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from distconv.placement import RuntimeConfigError
from distconv.runtime import detect_runtime
from tests.deploy.test_rank_checks_stateful_ranks import _sts

pytestmark = pytest.mark.timeout(60)

_FROM_HOST = {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "2"}


def _generated(obj: dict, prefix: str) -> None:
    del obj["metadata"]["name"]
    obj["metadata"]["generateName"] = prefix


def test_generated_shards_are_judged_without_stopping():
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=2, image="d:1"))
    (shards,) = [o for o in objs if o["kind"] == "StatefulSet"]
    _generated(shards, "j-pserver-")
    assert isinstance(manifest_problems(objs), list)  # was KeyError: 'name'
    del shards["metadata"]
    assert isinstance(manifest_problems(objs), list)  # was KeyError: 'metadata'


def _pods_place(replicas: int) -> bool:
    """Whether the pods ``w-<5 random characters>-<ordinal>`` each take their own rank of
    ``replicas``."""
    placed = []
    for ordinal in range(replicas):
        try:
            runtime = detect_runtime({}, _FROM_HOST, hostname=f"w-k7q2z-{ordinal}")
        except RuntimeConfigError:
            return False
        placed.append((runtime.rank, runtime.world_size))
    return placed == [(rank, replicas) for rank in range(replicas)]


@pytest.mark.parametrize("replicas", [2, 3])
def test_generated_statefulset_ranks_are_placed_by_their_pods_names(replicas):
    objs = _sts(replicas, _FROM_HOST)
    _generated(objs[-1], "w-")
    problems = [p for p in manifest_problems(objs) if "rank" in p]
    assert _pods_place(replicas) == (problems == []), problems
    assert not any("None" in p for p in problems), problems  # was pod None-2


def test_generated_bare_pod_is_placed_by_its_name():
    objs = copy.deepcopy(render_manifests(job_name="j", workers=1, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {**job["metadata"]}}
    pod["spec"] = job["spec"]["template"]["spec"]
    pod["spec"]["containers"][0]["env"].append(
        {"name": "DISTCONV_RANK_FROM_HOSTNAME", "value": "1"}
    )
    _generated(pod, "p-")
    problems = manifest_problems([o for o in objs if o is not job] + [pod])
    with pytest.raises(RuntimeConfigError):  # the pod's name has no ordinal
        detect_runtime({}, {"DISTCONV_RANK_FROM_HOSTNAME": "1"}, hostname="p-k7q2z")
    assert len(problems) == 1 and "'p-xxxxx' does not end in -<ordinal>" in problems[0], problems
