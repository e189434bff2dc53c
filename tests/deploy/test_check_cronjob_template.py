"""A CronJob is judged as the Job it creates (commit ec99361), but a CronJob
without ``jobTemplate`` or ``jobTemplate.spec``, which the API server refuses, was named only
by a line about a Job nobody wrote ('restartPolicy must be Never or OnFailure, got None'),
and a ``jobTemplate.metadata`` that is no mapping was named by nothing, only its lost labels
were."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _with_cronjob(job_template) -> list[dict]:
    """The rendered job, its worker Job replaced by a CronJob whose jobTemplate is given by
    ``job_template(job)`` (the rendered worker Job)."""
    service, shards, job = copy.deepcopy(
        render_manifests(job_name="j", workers=2, servers=1, image="d:1")
    )
    spec = {"schedule": "0 3 * * *", "concurrencyPolicy": "Forbid"}
    spec["jobTemplate"] = job_template(job)
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": job["metadata"]}
    return [service, shards, {**cron, "spec": spec}]


def test_a_cronjob_without_a_job_template_is_named_once():
    objs = _with_cronjob(lambda job: None)
    del objs[2]["spec"]["jobTemplate"]
    assert manifest_problems(objs) == [
        "CronJob j-worker: spec has no jobTemplate, which the API server needs"
    ]


def test_a_job_template_without_spec_is_named_once():
    objs = _with_cronjob(lambda job: {"metadata": {"labels": job["metadata"]["labels"]}})
    assert manifest_problems(objs) == [
        "CronJob j-worker: spec.jobTemplate has no spec, which the API server needs"
    ]


def test_a_job_templates_metadata_that_is_no_mapping_is_named():
    objs = _with_cronjob(lambda job: {"metadata": "x", "spec": job["spec"]})
    problems = manifest_problems(objs)
    assert "CronJob j-worker: spec.jobTemplate.metadata must be a mapping, got 'x'" in problems


def test_a_job_templates_namespace_is_not_the_jobs():
    """The CronJob controller creates each Job in the CronJob's
    namespace, copying only the jobTemplate's labels and annotations (getJobFromTemplate2),
    but the Job was judged in the jobTemplate's namespace: its ranks' short shard names were
    refused as another namespace's."""

    def job_template(job):
        return {"metadata": {**job["metadata"], "namespace": "other"}, "spec": job["spec"]}

    objs = _with_cronjob(job_template)
    objs[0]["metadata"]["namespace"] = objs[1]["metadata"]["namespace"] = "ns"
    assert manifest_problems(objs) == []
