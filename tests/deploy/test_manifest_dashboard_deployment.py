"""A Deployment beside the job that runs another program (a dashboard, a metrics exporter)
was held to what a shard's or a rank's pods must do: a port of it named ``health`` asked for
``/readyz`` and ``/healthz`` probes, which only distconv's health server answers, and its
default grace period (30 s) was refused as under the 60 s a rank needs to checkpoint. Neither
is asked of it now; the conventions every pod keeps (labels, non-root, resources, keys as
files) still are, and ranks run by a Deployment are still refused."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _with_deployment(command: list[str]) -> tuple[list[dict], dict]:
    """The rendered job and a Deployment ``j-dash`` whose pod runs ``command`` with a port
    named health, no probes and the default grace period; and that pod's container."""
    objs = copy.deepcopy(render_manifests(job_name="j", workers=2, servers=1, image="d:1"))
    (job,) = [o for o in objs if o["kind"] == "Job"]
    pod = copy.deepcopy(job["spec"]["template"])
    for key in ("restartPolicy", "terminationGracePeriodSeconds"):
        del pod["spec"][key]
    container = {
        key: value
        for key, value in pod["spec"]["containers"][0].items()
        if key not in ("args", "env", "readinessProbe", "livenessProbe", "startupProbe")
    }
    container.update(command=command, ports=[{"name": "health", "containerPort": 3000}])
    pod["spec"]["containers"] = [container]
    metadata = {**job["metadata"], "name": "j-dash"}
    spec = {"replicas": 1, "selector": {"matchLabels": {}}, "template": pod}
    return [
        *objs,
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec},
    ], container


def test_a_dashboard_deployment_needs_no_distconv_probes_nor_grace():
    objs, _ = _with_deployment(["grafana-server", "--homepath", "/usr/share/grafana"])
    assert manifest_problems(objs) == []


def test_a_dashboard_deployment_keeps_the_conventions_of_every_pod():
    objs, container = _with_deployment(["grafana-server"])
    del container["resources"]
    problems = manifest_problems(objs)
    assert "Deployment j-dash container worker: resources.requests.cpu is missing" in problems


def test_a_deployment_that_runs_ranks_is_still_held_to_everything():
    objs, _ = _with_deployment(["distconv", "train", "--resume", "auto"])
    problems = manifest_problems(objs)
    assert any(p.startswith("Deployment j-dash: runs distconv train") for p in problems)
    assert "Deployment j-dash: terminationGracePeriodSeconds 30 < 60 s" in problems
