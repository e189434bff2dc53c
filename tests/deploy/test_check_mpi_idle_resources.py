"""``distconv check-manifests`` names an MPIJob that would hold worker pods or GPUs idle for the
whole job: an ``-np`` that fills only some of the worker pods (Hydra fills the hosts' slots in
order, so the pods past the ranks run none), and a GPU worker pod that requests more devices
than its slots (each rank uses one: local rank R, device R).

The check named only an ``-np`` above the slots and too few GPUs: the Worker replicas raised
to 8 beside ``-np 4`` (4 pods of 2 CPU and 4Gi idle), or ``slotsPerWorker`` halved and the
replicas doubled on the GPU example (8 GPUs idle), passed (exit 0).

Each test copies the repo's example into real files, edits it as an operator would, and runs
the real check command on the folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.hand_edits import (
    copied_example,
    edit,
    one_problem,
    passes,
    pod_spec,
    problems,
    rendered,
)

pytestmark = pytest.mark.timeout(120)

CPU_FILE = "mpijob-digits-mpi.yaml"
GPU_FILE = "mpijob-digits-mpi-gpu.yaml"


def _shaped(replicas: int, slots: int | None = None, np: str | None = None):
    """The MPIJob with ``replicas`` worker pods, and ``slotsPerWorker`` and ``-np`` where
    given."""

    def change(mpijob: dict) -> None:
        mpijob["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = replicas
        if slots is not None:
            mpijob["spec"]["slotsPerWorker"] = slots
        if np is not None:
            (launcher,) = pod_spec(mpijob, "Launcher")["containers"]
            launcher["args"][launcher["args"].index("-np") + 1] = np

    return change


@pytest.mark.parametrize(
    ("replicas", "np", "said"),
    [
        (8, None, "-np 4 fills the slots of 4 of the 8 pods that run ranks (slotsPerWorker 1): "
                  "the other 4 worker pod(s) would sit idle, holding their CPU and memory; set "
                  "the Worker replicas to 4, or -np to 8"),
        (4, "3", "-np 3 fills the slots of 3 of the 4 pods that run ranks (slotsPerWorker 1): "
                 "the other 1 worker pod(s) would sit idle, holding their CPU and memory; set "
                 "the Worker replicas to 3, or -np to 4"),
    ],
    ids=["replicas-raised", "np-lowered"],
)  # fmt: skip
def test_worker_pods_past_the_ranks_are_named(
    tmp_path: Path, replicas: int, np: str | None, said: str
):
    folder = copied_example("mpijob", tmp_path)
    path = edit(folder / CPU_FILE, _shaped(replicas, np=np))
    assert one_problem(folder) == ([str(path)], f"MPIJob digits-mpi Launcher: {said}")


@pytest.mark.parametrize("placement", [["-ppn", "1"], ["--ppn=1"], ["-rr"]])
def test_ranks_placed_one_a_pod_leave_no_pod_idle(tmp_path: Path, placement: list[str]):
    """-np 4 on 4 pods of 2 slots, mpirun told to place one rank a host: every pod runs one,
    though the slots alone would fill two pods."""
    folder = copied_example("mpijob", tmp_path)

    def spread(mpijob: dict) -> None:
        _shaped(4, slots=2)(mpijob)
        (launcher,) = pod_spec(mpijob, "Launcher")["containers"]
        launcher["args"][1:1] = placement

    edit(folder / CPU_FILE, spread)
    assert not [line for line in problems(folder) if "would sit idle" in line]


def test_a_last_pod_the_ranks_only_part_fill_is_not_idle(tmp_path: Path):
    """-np 5 on 2 pods of 4 slots: the last pod runs a rank, no pod is idle."""
    folder = copied_example("mpijob-gpu", tmp_path)
    edit(folder / GPU_FILE, _shaped(2, np="5"))
    passes(folder)


def test_gpus_of_ranks_whose_device_the_cluster_fills_in_are_not_judged(tmp_path: Path):
    """A device from a ConfigMap may be the CPU (whose GPUs another line names) or the GPU."""
    folder = copied_example("mpijob-gpu", tmp_path)

    def device_from_the_cluster(mpijob: dict) -> None:
        _shaped(4, slots=2)(mpijob)
        (launcher,) = pod_spec(mpijob, "Launcher")["containers"]
        (device,) = [v for v in launcher["env"] if v["name"] == "DISTCONV_DEVICE"]
        del device["value"]
        device["valueFrom"] = {"configMapKeyRef": {"name": "train", "key": "device"}}

    edit(folder / GPU_FILE, device_from_the_cluster)
    passes(folder)


@pytest.mark.parametrize("gpus", ["0", "1"])
def test_the_examples_and_fresh_renders_still_pass(tmp_path: Path, gpus: str):
    passes(copied_example("mpijob-gpu" if gpus == "1" else "mpijob", tmp_path))
    argv = ("--mpi", "--workers", "8", "--slots-per-worker", "4", "--image", "d:1")
    passes(rendered(tmp_path, *argv, "--gpus", gpus))
