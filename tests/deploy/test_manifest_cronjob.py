"""A CronJob's workers (``spec.jobTemplate.spec.template``) were not checked at all: the walk
over pod templates read ``spec.template`` only, so a CronJob whose Job restarts its ranks for
ever, or runs another count of ranks than the shards wait for, passed. Each run of the
CronJob is a Job named ``<cronjob>-<time>``: it is now judged as that Job."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)

#: how a problem names the Job a CronJob ``j-worker`` creates (its name ends in the time)
JOB = "Job j-worker-xxxxx"


def _with_cronjob() -> tuple[list[dict], dict]:
    """The rendered job, its worker Job run by a CronJob instead; and that Job's spec."""
    service, shards, job = copy.deepcopy(
        render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    )
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": job["metadata"],
        "spec": {
            "schedule": "0 3 * * *",
            "concurrencyPolicy": "Forbid",
            "jobTemplate": {"metadata": {"labels": job["metadata"]["labels"]}, "spec": job["spec"]},
        },
    }
    return [service, shards, cron], job["spec"]


def test_a_cronjob_of_the_workers_has_no_problem():
    objs, _ = _with_cronjob()
    assert manifest_problems(objs) == []


def test_a_cronjobs_workers_that_restart_for_ever_are_named():
    objs, spec = _with_cronjob()
    spec["template"]["spec"]["restartPolicy"] = "Always"
    problems = manifest_problems(objs)
    assert f"{JOB}: restartPolicy must be Never or OnFailure, got 'Always'" in problems


def test_a_cronjobs_rank_count_is_compared_with_the_shards():
    objs, spec = _with_cronjob()
    spec["completions"] = spec["parallelism"] = 3
    problems = manifest_problems(objs)
    assert f"StatefulSet j-pserver: --workers 2 but {JOB} runs 3 ranks" in problems


def test_a_cronjobs_workers_are_held_to_the_conventions():
    objs, spec = _with_cronjob()
    del spec["template"]["spec"]["containers"][0]["resources"]
    problems = manifest_problems(objs)
    assert f"{JOB} container worker: resources.requests.cpu is missing" in problems


def test_a_cronjob_without_a_job_template_is_named():
    objs, _ = _with_cronjob()
    objs[2]["spec"]["jobTemplate"] = "x"
    problems = manifest_problems(objs)
    assert "CronJob j-worker: spec.jobTemplate must be a mapping, got 'x'" in problems
