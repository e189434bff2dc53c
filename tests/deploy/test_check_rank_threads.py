"""``distconv check-manifests`` names a rank whose thread variables (``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``, ``DISTCONV_NUM_THREADS``) ask more threads than
the CPUs its limit gives it: the renderer sizes them to each rank's share, and an operator who
lowers the CPU by hand, or raises an MPIJob's ``slotsPerWorker``, leaves them behind. Under an
MPIJob they are the launcher's (mpirun hands them to every rank it starts) and the CPUs are the
worker pods', shared by their slots. The check passed both (exit 0).

Fewer threads than CPUs pass: the renderer itself writes fewer where a share is no whole
number, and a CPU left to a rank's other threads may be meant.

Each test copies the repo's example, or renders a job with the real launcher, into real files,
edits it as an operator would, and runs the real check command on the folder.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.hand_edits import (
    copied_example,
    edit,
    located_problems,
    one_problem,
    passes,
    pod_spec,
    rendered,
)

pytestmark = pytest.mark.timeout(120)

ALL_AT_2 = "OMP_NUM_THREADS=2, OPENBLAS_NUM_THREADS=2, MKL_NUM_THREADS=2, DISTCONV_NUM_THREADS=2"
THROTTLED = (
    "they would oversubscribe it, the kernel throttles the container once they spend its CPU "
    "quota, and every other rank waits at each step for the throttled one; set them to {}"
)


def _cpu(cpu: object, replica: str | None = None):
    """Set the CPU request and limit of the workers' (or the MPIJob ``replica``'s) container."""

    def change(obj: dict) -> None:
        (container,) = pod_spec(obj, replica)["containers"]
        container["resources"]["requests"]["cpu"] = cpu
        container["resources"]["limits"]["cpu"] = cpu

    return change


@pytest.mark.parametrize(
    ("cpu", "allowed"), [("1", 1), ("1500m", 1), (1, 1)], ids=["one", "milli", "integer"]
)
def test_a_workers_cpu_lowered_below_its_threads_is_named(tmp_path: Path, cpu, allowed):
    folder = copied_example("pserver", tmp_path)
    path = edit(folder / "job-digits-ps-worker.yaml", _cpu(cpu))
    shown = "1.5" if cpu == "1500m" else "1"
    assert one_problem(folder) == (
        [str(path)],
        f"Job digits-ps-worker container worker: {ALL_AT_2} ask more threads than the {shown} "
        f"CPU(s) of its limit (resources.limits.cpu {cpu}): {THROTTLED.format(allowed)}",
    )


def test_one_variable_raised_alone_is_named_alone(tmp_path: Path):
    folder = copied_example("pserver", tmp_path)

    def raised(job: dict) -> None:
        (container,) = pod_spec(job)["containers"]
        (var,) = [v for v in container["env"] if v["name"] == "DISTCONV_NUM_THREADS"]
        var["value"] = "8"

    path = edit(folder / "job-digits-ps-worker.yaml", raised)
    assert one_problem(folder) == (
        [str(path)],
        "Job digits-ps-worker container worker: DISTCONV_NUM_THREADS=8 ask more threads than "
        f"the 2 CPU(s) of its limit (resources.limits.cpu 2): {THROTTLED.format(2)}",
    )


def test_an_mpijobs_threads_are_the_launchers_and_its_cpus_the_workers(tmp_path: Path):
    """The Worker's CPU lowered: the line is on the launcher, whose variables the ranks get."""
    folder = copied_example("mpijob", tmp_path)
    path = edit(folder / "mpijob-digits-mpi.yaml", _cpu("1", "Worker"))
    assert one_problem(folder) == (
        [str(path)],
        f"MPIJob digits-mpi Launcher container launcher: {ALL_AT_2} ask more threads than the 1 "
        "CPU(s) each rank gets in MPIJob digits-mpi Worker container worker "
        "(resources.limits.cpu 1 over slotsPerWorker 1), where mpirun starts the ranks with "
        f"them: {THROTTLED.format(1)}",
    )


def test_an_mpijobs_cpus_are_shared_by_its_slots(tmp_path: Path):
    """A render of 4 slots a pod (8 CPUs) edited to 4 CPUs: 1 each for threads of 2."""
    folder = rendered(
        tmp_path, "--mpi", "--workers", "8", "--slots-per-worker", "4", "--image", "d:1"
    )
    path = edit(folder / "mpijob-distconv.yaml", _cpu("4", "Worker"))
    assert one_problem(folder) == (
        [str(path)],
        f"MPIJob distconv Launcher container launcher: {ALL_AT_2} ask more threads than the 1 "
        "CPU(s) each rank gets in MPIJob distconv Worker container worker "
        "(resources.limits.cpu 4 over slotsPerWorker 4), where mpirun starts the ranks with "
        f"them: {THROTTLED.format(1)}",
    )


@pytest.mark.parametrize("example", ["pserver", "mpijob"])
def test_fewer_threads_than_cpus_pass(tmp_path: Path, example: str):
    """The CPU raised to 4 beside threads of 2: a choice, not a job that fails or stalls."""
    folder = copied_example(example, tmp_path)
    if example == "pserver":
        edit(folder / "job-digits-ps-worker.yaml", _cpu("4"))
    else:
        edit(folder / "mpijob-digits-mpi.yaml", _cpu("4", "Worker"))
    passes(folder)


def test_threads_the_cluster_sets_are_not_judged(tmp_path: Path):
    folder = copied_example("pserver", tmp_path)

    def from_the_cluster(job: dict) -> None:
        _cpu("1")(job)
        (container,) = pod_spec(job)["containers"]
        for var in container["env"]:
            if var["name"].endswith("_NUM_THREADS"):
                del var["value"]
                var["valueFrom"] = {"configMapKeyRef": {"name": "threads", "key": "n"}}

    edit(folder / "job-digits-ps-worker.yaml", from_the_cluster)
    passes(folder)


@pytest.mark.parametrize("example", ["pserver", "pserver-gpu", "mpijob", "mpijob-gpu"])
def test_the_examples_and_fresh_renders_still_pass(tmp_path: Path, example: str):
    passes(copied_example(example, tmp_path))
    servers = ("--mpi", "--slots-per-worker", "2") if example.startswith("mpi") else ()
    gpus = "1" if example.endswith("gpu") else "0"
    argv = ("--workers", "4", *servers, "--image", "d:1", "--gpus", gpus)
    passes(rendered(tmp_path, *argv))


def test_a_slots_per_worker_of_0_is_named_with_no_share_divided_by_it(tmp_path: Path):
    """slotsPerWorker 0, which the CRD takes: the count's line (and the slots' total), not a
    division by it (a traceback, exit 2) nor a share of CPUs or GPUs made up from it."""
    folder = copied_example("mpijob-gpu", tmp_path)

    def no_slots(mpijob: dict) -> None:
        mpijob["spec"]["slotsPerWorker"] = 0

    path = edit(folder / "mpijob-digits-mpi-gpu.yaml", no_slots)
    assert located_problems(folder) == [
        ([str(path)], "MPIJob digits-mpi-gpu: slotsPerWorker must be an integer >= 1, got 0"),
        ([str(path)], "MPIJob digits-mpi-gpu Launcher: -np 8 exceeds the workers' slots (0 = "
                      "replicas x slotsPerWorker)"),
    ]  # fmt: skip
