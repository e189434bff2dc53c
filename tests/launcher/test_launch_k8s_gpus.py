"""``distconv-launch k8s --gpus 2`` was refused with exit 1, a failure, where ``--gpus -1`` is a
usage error (exit 2), and said why but not how to use two GPUs per pod, which an old manifest's
``--gpus 2`` wanted. It is now refused at option parsing, exit 2, naming the way (MPIJob:
``--gpus 1 --slots-per-worker 2``; parameter server: more ``--workers``), which renders; the
renderer's own check says the same words to its API callers. A real ``python -m launcher``."""

from __future__ import annotations

import pytest

from distconv.deploy.render import render_manifests
from tests.launcher.test_launch_k8s import launch

pytestmark = pytest.mark.timeout(60)

#: the refusal's words after "argument --gpus: " (not imported: a test of them must not take
#: them from the code)
TOO_MANY = (
    "must be 0 or 1 (GPUs per training rank), got 2: a rank trains on one device, so 1 of each "
    "rank's 2 would sit idle. To use 2 GPUs per pod, give --gpus 1 --slots-per-worker 2 in an "
    "MPIJob (a rank per GPU, --workers a multiple of 2); in a parameter-server job, give more "
    "--workers (a pod of one rank and one GPU each)"
)
IMAGE = ("--image", "reg.example/distconv:v1")


@pytest.mark.parametrize("shape", [("--mpi",), ("--servers", "1")], ids=["mpijob", "pserver"])
def test_a_second_gpu_per_rank_is_a_usage_error_that_says_the_way(tmp_path, shape):
    out = tmp_path / "manifests"
    done = launch("--workers", "2", *shape, "--gpus", "2", *IMAGE, "--out", str(out))
    assert done.returncode == 2, done.stderr
    last = done.stderr.splitlines()[-1]
    assert last == f"distconv-launch k8s: error: argument --gpus: {TOO_MANY}", done.stderr
    assert done.stdout == "" and not out.exists(), done.stdout


def test_the_way_it_says_renders_two_gpus_per_mpijob_worker_pod():
    done = launch("--workers", "2", "--mpi", "--gpus", "1", "--slots-per-worker", "2", *IMAGE)
    assert done.returncode == 0, done.stderr
    assert "nvidia.com/gpu: 2" in done.stdout, done.stdout


def test_the_renderers_own_refusal_says_the_same_words():
    with pytest.raises(ValueError) as refused:
        render_manifests(job_name="g", workers=2, servers=1, image="d:1", gpus=2)
    assert str(refused.value) == f"--gpus {TOO_MANY}"
