"""A job's shards serve one world of ranks (``--workers``, one job id): two workers' Jobs beside
them each place their pods as ranks 0..N-1 of the same world, so every rank is claimed twice.
The check compared each Job alone with the shards' ``--workers`` and passed both.
The verdict is held to the pods started for real."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests
from tests.deploy.index_pods import start_pod

pytestmark = pytest.mark.timeout(120)


def _objs() -> list[dict]:
    return copy.deepcopy(render_manifests(job_name="j", workers=3, servers=1, image="d:1"))


def test_a_second_workers_job_beside_the_shards_is_named(tmp_path):
    objs = _objs()
    (job,) = [o for o in objs if o["kind"] == "Job"]
    other = copy.deepcopy(job)
    other["metadata"]["name"] = "j-worker-b"
    # both Jobs' pods of an index claim its rank (one index shows it: the pods share all else)
    assert start_pod(job, 2, tmp_path).placed == start_pod(other, 2, tmp_path).placed
    assert manifest_problems([*objs, other]) == [
        "Job j-worker, Job j-worker-b: 2 Jobs run distconv train beside the shards (StatefulSet "
        "j-pserver), whose ranks are one world: each rank would be claimed by each Job"
    ]


def test_one_workers_job_beside_the_shards_passes():
    assert manifest_problems(_objs()) == []
