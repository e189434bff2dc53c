"""A CronJob whose Job runs the ranks, with the default ``concurrencyPolicy: Allow``, starts
the next run while the last one still runs: two Jobs then claim the same ranks of the shards'
one world and write the same checkpoint directory. The check passed it; it now
names the CronJob and says to set ``Forbid`` (or ``Replace``), as docs/kubernetes.md does."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.job_shapes import kubernetes_doc_text
from tests.deploy.test_check_other_programs import _job_running
from tests.deploy.test_manifest_cronjob import _with_cronjob

pytestmark = pytest.mark.timeout(60)

_OVERLAP = (
    "CronJob j-worker: concurrencyPolicy {} lets a run start while the last one still runs, "
    "and the two Jobs would claim the same ranks and checkpoint directory: set "
    "concurrencyPolicy: Forbid (or Replace)"
)


@pytest.mark.parametrize("policy", [None, "Allow"], ids=["default", "allow"])
def test_a_cronjob_of_ranks_that_lets_runs_overlap_is_refused(policy):
    objs, _ = _with_cronjob()
    del objs[2]["spec"]["concurrencyPolicy"]
    if policy is not None:
        objs[2]["spec"]["concurrencyPolicy"] = policy
    assert manifest_problems(objs) == [_OVERLAP.format("Allow")]


@pytest.mark.parametrize("policy", ["Forbid", "Replace"])
def test_a_cronjob_of_ranks_that_runs_one_at_a_time_passes(policy):
    objs, _ = _with_cronjob()
    objs[2]["spec"]["concurrencyPolicy"] = policy
    assert manifest_problems(objs) == []


def test_a_cronjob_that_runs_another_program_may_overlap():
    objs, template = _job_running(["rclone", "sync", "/ckpt", "s3:b/ckpt"], True)
    metadata = {**objs[0]["metadata"], "name": "j-backup"}
    job_template = {"metadata": {"labels": metadata["labels"]}, "spec": {"template": template}}
    spec = {"schedule": "0 * * * *", "jobTemplate": job_template}
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": metadata, "spec": spec}
    assert manifest_problems([*objs, cron]) == []


def test_the_docs_say_to_forbid_overlapping_runs():
    assert "set `concurrencyPolicy: Forbid` (or `Replace`)" in kubernetes_doc_text()
