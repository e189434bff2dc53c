"""A bare Pod that runs ``distconv train`` with no ``--sync`` and names no shards (no
``--pservers``, no ``DISTCONV_PSERVERS``) trains locally, as the rank chooses its transport,
and never reaches the shards; b26f036 left out only a rank whose ``--sync`` says another
transport, so this baseline beside the worker Job was refused ('claimed by each of them'), and
beside the shards alone was compared with their ``--workers``."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from tests.deploy.test_manifest_bare_pod_workers import _shards_and_pods

pytestmark = pytest.mark.timeout(60)


def _beside(workers: int, args: list[str], env: list[dict]) -> tuple[list[dict], dict]:
    """The rendered Service and shards (``--workers workers``), the worker Job, and a bare Pod
    ``j-w0`` running ``distconv train`` with its resume, out and probe flags and ``args``, and
    with ``env`` instead of ``DISTCONV_PSERVERS``: the Service and shards, the Job, the Pod."""
    service, shards, job = copy.deepcopy(
        render_manifests(job_name="j", workers=workers, servers=1, image="d:1")
    )
    (pod,) = _shards_and_pods(workers=workers, pods=1)[2:]
    container = pod["spec"]["containers"][0]
    keep = ("--resume", "--out", "--health-port", "--health-host")
    given = container["args"]
    flags = [w for i, w in enumerate(given) if w in keep or (i and given[i - 1] in keep)]
    container["args"] = ["distconv", "train", *flags, *args]
    container["env"] = [v for v in container["env"] if v["name"] != "DISTCONV_PSERVERS"] + env
    return [service, shards], job, pod


@pytest.mark.parametrize(
    ("args", "env"),
    [
        ([], []),
        ([], [{"name": "DISTCONV_PSERVERS", "value": " "}]),
    ],
    ids=["no-shards", "blank-variable"],
)
def test_a_bare_pod_that_names_no_shards_trains_locally_and_is_no_rank_of_theirs(args, env):
    shards, job, pod = _beside(1, args, env)
    assert manifest_problems([*shards, job, pod]) == []
    shards, _, pod = _beside(2, args, env)
    assert manifest_problems([*shards, pod]) == []


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--pservers", "j-pserver-0.j-pserver:5555"], []),
        ([], [{"name": "DISTCONV_PSERVERS", "value": "j-pserver-0.j-pserver:5555"}]),
        ([], [{"name": "DISTCONV_PSERVERS", "valueFrom": {"configMapKeyRef": {"key": "p"}}}]),
    ],
    ids=["flag", "variable", "cluster"],
)
def test_a_bare_pod_that_names_the_shards_is_still_their_rank(args, env):
    shards, job, pod = _beside(1, args, env)
    problems = manifest_problems([*shards, job, pod])
    assert any("claimed by each of them" in p for p in problems)
