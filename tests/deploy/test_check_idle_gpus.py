"""``distconv check-manifests`` names a rank's pod that requests more GPUs than its ranks use.

Local rank R uses CUDA device R (:func:`distconv.backend.gpu_index`), one device a rank: a
workers' pod edited to ``nvidia.com/gpu: 2`` for its one rank passed, one GPU of each pod held
idle, away from other jobs.

Each test copies the examples into real files, edits them as an operator would, and runs the
real check command on them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from distconv.deploy.render import render_manifests
from tests.deploy.hand_edits import (
    copied_examples,
    edit,
    one_problem,
    passes,
    rendered_examples,
)

pytestmark = pytest.mark.timeout(120)

GPU = "nvidia.com/gpu"


def _gpus(count: int, role: str | None = None):
    """The edit that gives the ranks' pod (an MPIJob's ``role`` pods) ``count`` GPUs."""

    def edit(obj: dict) -> None:
        spec = obj["spec"]
        template = spec["mpiReplicaSpecs"][role]["template"] if role else spec["template"]
        (container,) = template["spec"]["containers"]
        container["resources"]["limits"][GPU] = count

    return edit


def test_a_workers_pod_with_more_gpus_than_its_rank_is_named(tmp_path: Path):
    (example,) = copied_examples(tmp_path, "pserver-gpu")
    workers = example / "job-digits-ps-gpu-worker.yaml"
    edit(workers, _gpus(2))
    files, what = one_problem(example)
    assert files == [str(workers)]
    assert what == (
        f"Job digits-ps-gpu-worker: 1 rank(s) per pod train on GPUs but the pod requests 2 {GPU}; "
        "each rank uses one device, so 1 would sit idle: request 1"
    )


def test_an_mpi_worker_pod_with_more_gpus_than_its_slots_is_named(tmp_path: Path):
    (example,) = copied_examples(tmp_path, "mpijob-gpu")
    mpijob = example / "mpijob-digits-mpi-gpu.yaml"

    def two_slots_on_four_pods(obj: dict) -> None:
        obj["spec"]["slotsPerWorker"] = 2
        obj["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 4

    edit(mpijob, two_slots_on_four_pods)
    files, what = one_problem(example)
    assert files == [str(mpijob)]
    assert what == (
        f"MPIJob digits-mpi-gpu Worker: 2 rank(s) per pod train on GPUs but the pod requests 4 "
        f"{GPU}; each rank uses one device, so 2 would sit idle: request 2"
    )


@pytest.mark.parametrize("made", [copied_examples, rendered_examples], ids=["checked-in", "fresh"])
def test_the_gpu_examples_pass(tmp_path: Path, made):
    for example in made(tmp_path, "pserver-gpu", "mpijob-gpu"):
        passes(example)


def test_the_renderer_refuses_a_second_gpu_per_rank():
    """A rank trains on one device (local rank R of a pod on CUDA device R): a render of two
    GPUs per rank would hold half of them idle, which the check above refuses."""
    with pytest.raises(ValueError, match=r"--gpus must be 0 or 1 .*got 2: a rank trains on one "):
        render_manifests(job_name="g", workers=2, servers=1, image="d:1", gpus=2)


def test_slots_no_int32_holds_are_named_once_not_as_a_pod_of_one_rank(tmp_path: Path):
    """``slotsPerWorker`` past an int32, which the checks read as 1 where they must read a
    count, is named by the count's own line: no second line telling the operator to cut the
    pod's GPUs to 1, as if it held one rank."""
    (example,) = copied_examples(tmp_path, "mpijob-gpu")
    mpijob = example / "mpijob-digits-mpi-gpu.yaml"
    edit(mpijob, lambda obj: obj["spec"].update(slotsPerWorker=2**31))
    files, what = one_problem(example)
    assert files == [str(mpijob)]
    most = 2**31 - 1
    assert what == (
        f"MPIJob digits-mpi-gpu: slotsPerWorker must be at most {most} (an int32), got {most + 1}"
    )
