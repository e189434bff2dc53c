"""``distconv-launch k8s`` of a parameter-server job names the Secrets its pods mount.

The shards mount ``<job>-server-keys`` and the workers ``<job>-worker-keys``, which no manifest
holds; the render said nothing of them, so manifests applied as the README showed left every pod
in ContainerCreating (``secret "distconv-server-keys" not found``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.launcher.launch_cli import launch

PSERVER = ["k8s", "--workers", "3", "--servers", "2", "--image", "reg/distconv:1"]
HOW = (
    "which the cluster must hold before the manifests are applied: make them with 'distconv "
    "keys DIR --workers 3' and 'kubectl create secret generic' (docs/kubernetes.md, "
    '"Deploying with parameter servers", step 1)'
)


@pytest.mark.timeout(60)
def test_a_rendered_pserver_job_names_the_secrets_its_pods_mount(tmp_path: Path):
    done = launch(*PSERVER, "--job-name", "digits", "--", "--epochs", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    mounted = sorted(set(re.findall(r"secretName: (\S+)", done.stdout)))
    assert mounted == ["digits-server-keys", "digits-worker-keys"]
    (line,) = done.stderr.splitlines()
    assert line == f"the pods mount the Secrets digits-server-keys and digits-worker-keys, {HOW}"


@pytest.mark.timeout(60)
def test_the_secrets_are_named_after_wrote_n_objects(tmp_path: Path):
    done = launch(*PSERVER, "--out", "m", "--", "--epochs", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "wrote 3 object(s) to 'm'",
        f"the pods mount the Secrets distconv-server-keys and distconv-worker-keys, {HOW}",
    ]


@pytest.mark.timeout(60)
def test_an_mpijob_mounts_no_secret_and_none_is_named(tmp_path: Path):
    done = launch("k8s", "--workers", "2", "--mpi", "--image", "reg/distconv:1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "secretName" not in done.stdout and done.stderr == ""
