"""A number the checks read from a hand-edited manifest (``mpirun -np``, a rank's
``--health-port``) in digits other than ASCII ones: ``²``, which ``str.isdigit`` takes and
``int()`` refuses, stopped :func:`manifest_problems` with a bare ValueError; ``٤`` (Arabic-Indic
4), which ``int()`` reads as 4, passed as ``-np 4`` although mpirun reads no number there."""

from __future__ import annotations

import copy

import pytest

from distconv.deploy import manifest_problems, render_manifests

pytestmark = pytest.mark.timeout(60)


def _launcher(objs: list[dict]) -> dict:
    spec = objs[0]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    return spec["containers"][0]


@pytest.mark.parametrize("np", ["²", "٤", "4²"])
def test_np_in_other_digits_is_named(np):
    objs = copy.deepcopy(render_manifests(job_name="m", workers=4, servers=0, image="d:1"))
    args = _launcher(objs)["args"]
    args[args.index("-np") + 1] = np
    problems = manifest_problems(objs)
    assert f"MPIJob m Launcher: mpirun needs -np with a number, got {np!r}" in problems


@pytest.mark.parametrize("mpi", [False, True])
def test_a_health_port_in_other_digits_is_named(mpi):
    servers = 0 if mpi else 1
    objs = copy.deepcopy(render_manifests(job_name="m", workers=2, servers=servers, image="d:1"))
    if mpi:
        container = _launcher(objs)
    else:
        (job,) = [o for o in objs if o["kind"] == "Job"]
        (container,) = job["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    args[args.index("--health-port") + 1] = "²"
    problems = manifest_problems(objs)
    assert any("argument --health-port: must be an integer, got '²'" in p for p in problems)
    assert any("--health-port ² is no container port named health" in p for p in problems)
