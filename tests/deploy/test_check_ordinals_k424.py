"""``distconv check-manifests``: review k424's finding on the shards' ``spec.ordinals``,
shown by a test that failed before its fix."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(30)


def _one_shard_at(start: int, dialled: int) -> list[dict]:
    """A job of one shard whose ``--shard 0`` is written out, its StatefulSet numbering its pod
    from ``start``, the workers dialling that StatefulSet's pod ``dialled``."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (shards,) = [o for o in objs if o["kind"] == "StatefulSet"]
    shards["spec"]["ordinals"] = {"start": start}
    args = shards["spec"]["template"]["spec"]["containers"][0]["args"]
    args[args.index("$(DISTCONV_SHARD)")] = "0"
    (job,) = [o for o in objs if o["kind"] == "Job"]
    worker = job["spec"]["template"]["spec"]["containers"][0]
    address = f"j-pserver-{dialled}.j-pserver:5555"
    worker["args"][worker["args"].index("--pservers") + 1] = address
    for var in worker["env"]:
        if var["name"] == "DISTCONV_PSERVERS":
            var["value"] = address
    return objs


@pytest.mark.parametrize("start", [1, 3])
def test_a_shard_that_does_not_take_its_index_from_its_pod_may_start_past_0(start):
    """One shard with ``--shard 0`` written out serves shard 0 whatever its pod's ordinal, and
    the workers that dial its pod, ``j-pserver-<start>``, reach it: a valid job. It was refused
    as 'spec.ordinals.start 1 numbers the shards' pods from j-pserver-1, but a shard serves its
    pod's ordinal', which it does not; the workers' list was compared with no name."""
    assert manifest_problems(_one_shard_at(start, start)) == []


def test_workers_that_dial_a_shard_pod_past_0_by_another_name_are_named():
    """The same shard's pod is ``j-pserver-1``; workers that dial ``j-pserver-0`` dial a pod
    that does not exist. The shards' names were numbered from 0 whatever the start."""
    assert manifest_problems(_one_shard_at(1, 0)) == [
        "Job j-worker: --pservers 'j-pserver-0.j-pserver:5555' is not the "
        "shards' DNS names 'j-pserver-1.j-pserver:5555'",
        "Job j-worker: DISTCONV_PSERVERS 'j-pserver-0.j-pserver:5555' is not "
        "the shards' DNS names 'j-pserver-1.j-pserver:5555'",
    ]
