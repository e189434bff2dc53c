"""A Job or a CronJob beside the training job that runs another program (a data download
before it, a checkpoint backup every hour) was held to the 60 s grace period a rank needs to
checkpoint after SIGTERM, and to the probes only distconv serves: only a Deployment (or
another restarting controller) running no shard, rank nor sshd was spared them (commit
ca9acf6), and since CronJobs' Jobs are judged (ec99361), a backup CronJob that passed
before was refused for its default 30 s."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _job_running(command: list[str], with_health_port: bool = False) -> tuple[list[dict], dict]:
    """The rendered job and its worker Job's pod template, changed to run ``command`` with
    the default grace period and no probes (a port named health where ``with_health_port``):
    the manifests and that template."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    template = copy.deepcopy(job["spec"]["template"])
    del template["spec"]["terminationGracePeriodSeconds"]
    dropped = ("args", "env", "ports", "readinessProbe", "livenessProbe", "startupProbe")
    container = {k: v for k, v in template["spec"]["containers"][0].items() if k not in dropped}
    container["command"] = command
    if with_health_port:
        container["ports"] = [{"name": "health", "containerPort": 9000}]
    template["spec"]["containers"] = [container]
    return objs, template


def test_a_cronjob_that_backs_up_the_checkpoints_passes():
    objs, template = _job_running(["rclone", "sync", "/ckpt", "s3:bucket/ckpt"], True)
    metadata = {**objs[0]["metadata"], "name": "j-backup"}
    job_template = {"metadata": {"labels": metadata["labels"]}, "spec": {"template": template}}
    spec = {"schedule": "0 * * * *", "concurrencyPolicy": "Forbid", "jobTemplate": job_template}
    cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": metadata, "spec": spec}
    assert manifest_problems([*objs, cron]) == []


def test_a_job_that_downloads_the_data_passes():
    objs, template = _job_running(["sh", "-c", "curl -fo /data/train.npz $URL"])
    metadata = {**objs[0]["metadata"], "name": "j-fetch"}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata}
    job["spec"] = {"template": template}
    assert manifest_problems([*objs, job]) == []


def test_a_job_of_ranks_is_still_held_to_the_grace_period():
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    del job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert manifest_problems(objs) == ["Job j-worker: terminationGracePeriodSeconds 30 < 60 s"]


_TRAIN = "distconv train --sync pserver --resume auto --out /var/lib/distconv/run/train"


@pytest.mark.parametrize(
    ("command", "env"),
    [
        (["distconv-launch", "local", "--workers", "2", "--", "--epochs", "3"], []),
        (["python", "-m", "distconv.launch", "mpi", "--workers", "2"], []),
        (["sh", "-c", "exec $TRAIN"], [{"name": "TRAIN", "value": _TRAIN}]),
        (["sh", "-c", "cd /x && ${TRAIN}"], [{"name": "TRAIN", "value": _TRAIN}]),
        (["$(PROGRAM)", "train"], [{"name": "PROGRAM", "value": "distconv"}]),
        (["$(PROGRAM)"], [{"name": "PROGRAM", "valueFrom": {"configMapKeyRef": {"key": "p"}}}]),
    ],
    ids=["launcher", "launcher-module", "shell-variable", "shell-braces", "kubelet", "cluster"],
)
def test_a_job_whose_ranks_start_through_the_launcher_or_a_variable_is_held(command, env):
    """b52a370 spared a Job whose pods run "another program", read from the
    command line as written: ranks started through the launcher (which forwards SIGTERM to
    them) or through a variable (``$TRAIN``, ``$(PROGRAM)``) were taken for one, and their
    default 30 s grace, which kills a rank before its checkpoint, passed."""
    objs, template = _job_running(command)
    template["spec"]["containers"][0]["env"] = env
    metadata = {**objs[0]["metadata"], "name": "j-solo"}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata}
    job["spec"] = {"template": template}
    problems = manifest_problems([*objs, job])
    assert "Job j-solo: terminationGracePeriodSeconds 30 < 60 s" in problems


@pytest.mark.parametrize(
    "command",
    [
        ["distconv-launch", "k8s", "--workers", "2", "--image", "d:1"],
        ["sh", "-c", "exec $UPLOAD /ckpt"],
    ],
    ids=["launcher-renders", "shell-variable-of-another-program"],
)
def test_a_job_that_runs_no_rank_through_the_launcher_or_a_variable_passes(command):
    objs, template = _job_running(command)
    template["spec"]["containers"][0]["env"] = [{"name": "UPLOAD", "value": "rclone copy"}]
    metadata = {**objs[0]["metadata"], "name": "j-other"}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata}
    job["spec"] = {"template": template}
    assert manifest_problems([*objs, job]) == []
