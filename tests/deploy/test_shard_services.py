"""The shards' StatefulSet and Service let the shards meet worker 0 before any of them is ready:
a shard becomes ready only once worker 0 has seeded it, after every shard answered its hello by
its DNS name, so a shard held back until another is ready, or a name published only for ready
pods, leaves the job unready for good; the checks name both."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _edited(servers: int, edit) -> list[str]:
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=servers, image="d:1"))
    service, sts, _ = objs
    edit(service["spec"], sts["spec"])
    return manifest_problems(objs)


@pytest.mark.parametrize(
    "servers, edit, named",
    [
        (2, lambda svc, sts: None, None),
        (2, lambda svc, sts: sts.pop("podManagementPolicy"), "'OrderedReady'"),
        (2, lambda svc, sts: sts.update(podManagementPolicy="OrderedReady"), "'OrderedReady'"),
        (1, lambda svc, sts: sts.pop("podManagementPolicy"), None),  # one shard waits for none
        (2, lambda svc, sts: svc.pop("publishNotReadyAddresses"), "publishNotReadyAddresses"),
        (1, lambda svc, sts: svc.update(publishNotReadyAddresses=False), "publishNotReady"),
    ],
)
def test_shards_that_could_never_become_ready_are_refused(servers, edit, named):
    problems = _edited(servers, edit)
    if named is None:
        assert problems == []
    else:
        (problem,) = problems
        assert problem.startswith("StatefulSet j-pserver: ") and named in problem, problems
        assert "worker 0" in problem
