"""A Job whose one rank trains through another transport (``--sync local``: a smoke run)
beside the shards alone was still compared with their ``--workers``, though it never reaches
them ('StatefulSet j-pserver: --workers 2 but Job j-smoke runs 1 rank'): b26f036 left such
ranks out of the shards' world, but not out of that comparison."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)

_PLACED = ("DISTCONV_PSERVERS", "DISTCONV_WORLD_SIZE")


def _shards_and_smoke_job(sync: list[str]) -> list[dict]:
    """The rendered Service and shards (``--workers 2``) and a Job ``j-smoke`` of one pod,
    running the worker's ``distconv train`` with ``sync``, its resume, out and probe flags
    kept, and no shards named."""
    service, shards, job = copy.deepcopy(
        render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    )
    for key in ("completionMode", "completions", "parallelism"):
        job["spec"].pop(key, None)
    job["metadata"]["name"] = "j-smoke"
    container = job["spec"]["template"]["spec"]["containers"][0]
    keep = ("--resume", "--out", "--health-port", "--health-host")
    given = container["args"]
    flags = [w for i, w in enumerate(given) if w in keep or (i and given[i - 1] in keep)]
    container["args"] = ["distconv", "train", *sync, *flags]
    container["env"] = [v for v in container["env"] if v["name"] not in _PLACED]
    return [service, shards, job]


@pytest.mark.parametrize("sync", [["--sync", "local"], ["--sync=local"], []])
def test_a_one_rank_job_of_another_transport_is_not_compared_with_the_shards(sync):
    assert manifest_problems(_shards_and_smoke_job(sync)) == []


def test_a_one_rank_job_of_the_shards_is_still_compared_with_them():
    objs = _shards_and_smoke_job(["--sync", "pserver", "--pservers", "j-pserver-0.j-pserver:5555"])
    assert manifest_problems(objs) == [
        "StatefulSet j-pserver: --workers 2 but Job j-smoke runs 1 rank"
    ]
