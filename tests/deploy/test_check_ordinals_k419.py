"""``distconv check-manifests``: review k419's finding on a StatefulSet's ``spec.ordinals``,
shown by a test that failed before its fix."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from tests.deploy.test_rank_checks_stateful_ranks import _sts

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("start", [-5, -1])
def test_a_negative_ordinals_start_is_named_once_not_judged_as_pods(start):
    """``spec.ordinals.start: -5`` is refused by the API server, and named so ('start must be
    an integer >= 0'); the check also judged the pods it would name, adding 'pod j-worker--5's
    rank would refuse to start' for a set that is never made. It is named once."""
    env = {"DISTCONV_RANK_FROM_HOSTNAME": "1", "DISTCONV_WORLD_SIZE": "3"}
    lines = [
        p for p in manifest_problems(_sts(3, env, start=start)) if "ordinal" in p or "would" in p
    ]
    assert lines == [
        f"StatefulSet j-worker spec.ordinals: start must be an integer >= 0, got {start}"
    ]


@pytest.mark.parametrize("start", [1, 3])
def test_shards_whose_ordinals_start_past_0_are_named(start):
    """The shards' StatefulSet numbers its pods from ``spec.ordinals.start``; each serves its
    pod's ordinal (the pod-index label) and the workers dial ``<name>-0`` on. From 1, no pod
    serves shard 0 and one serves a shard past the count: the job never starts. The check
    judged the shards' names as if they were numbered from 0 and said nothing."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=2, image="d:1"))
    (shards,) = [o for o in objs if o["kind"] == "StatefulSet"]
    shards["spec"]["ordinals"] = {"start": start}
    assert manifest_problems(objs) == [
        f"StatefulSet j-pserver: spec.ordinals.start {start} numbers the shards' pods from "
        f"j-pserver-{start}, but a shard serves its pod's ordinal and the shards are 0 to "
        "replicas - 1, dialled as j-pserver-0 on (set spec.ordinals.start 0)"
    ]
