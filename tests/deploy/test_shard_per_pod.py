"""A shards' StatefulSet of several replicas whose ``--shard`` is written out (or filled in from
a literal value) has every pod serve that one shard: every worker's hello then fails. The check
passed it."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _shards(servers: int) -> tuple[list[dict], dict]:
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=servers, image="d:1"))
    (sts,) = [o for o in objs if o["kind"] == "StatefulSet"]
    (container,) = sts["spec"]["template"]["spec"]["containers"]
    return objs, container


@pytest.mark.parametrize("written", [["--shard", "0"], ["--shard=1"], ["--sh", "0"]])
def test_a_shard_written_into_every_replica_is_refused(written):
    objs, container = _shards(2)
    args = container["args"]
    at = args.index("--shard")
    args[at : at + 2] = written
    (problem,) = manifest_problems(objs)
    assert "is in every shard's arguments" in problem and "2 replicas" in problem, problem


def test_a_shard_filled_in_from_a_literal_value_is_refused():
    objs, container = _shards(3)
    for var in container["env"]:
        if var["name"] == "DISTCONV_SHARD":
            del var["valueFrom"]
            var["value"] = "2"
    (problem,) = manifest_problems(objs)
    assert "--shard 2 is in every shard's arguments" in problem and "3 replicas" in problem


def test_one_replica_or_the_pods_own_index_passes():
    objs, container = _shards(1)
    args = container["args"]
    args[args.index("--shard") + 1] = "0"
    assert manifest_problems(objs) == []
    assert manifest_problems(_shards(2)[0]) == []  # $(DISTCONV_SHARD), from the pod's index


def test_a_shard_out_of_range_is_named_once():
    objs, container = _shards(2)
    args = container["args"]
    args[args.index("--shard") + 1] = "5"
    (problem,) = manifest_problems(objs)
    assert "need 0 <= --shard < --num-shards" in problem
