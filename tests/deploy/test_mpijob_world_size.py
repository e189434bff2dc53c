"""An MPIJob's ranks get the launcher's environment (Hydra forwards it): a DISTCONV_WORLD_SIZE
there that is not mpirun's ``-np`` stops every rank (``two sources disagree about the world
size``), and the check passed it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distconv.deploy import manifest_problems
from tests.child_env import child_path
from tests.deploy.job_shapes import mpijob

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("size", ["3", "8", "", "four"])
def test_a_world_size_other_than_np_is_refused(size):
    (problem,) = manifest_problems(mpijob({"value": size}))
    assert f"DISTCONV_WORLD_SIZE {size!r} but mpirun starts 4 ranks (-np)" in problem


@pytest.mark.parametrize(
    "value",
    [
        None,
        {"value": "4"},
        {"value": "04"},
        {"valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
    ],
)
def test_np_itself_or_a_size_the_cluster_fills_in_passes(value):
    assert manifest_problems(mpijob(value)) == []


@pytest.mark.parametrize("text", ["$(N)", "$$(N)", "$(JOB_COMPLETION_INDEX)"])
def test_a_size_left_as_written_is_refused(text):
    """Hydra forwards the launcher's environment: each rank reads the text and refuses it
    (``placement.env_int``), as the real ranks below do with any other count; it passed."""
    (problem,) = manifest_problems(mpijob({"value": text}))
    assert "but mpirun starts 4 ranks (-np): every rank would refuse to start (" in problem


def _under_mpiexec(world_size: str, out: Path) -> subprocess.CompletedProcess:
    """``detect_runtime()`` in each of 2 ranks of a real mpiexec, with DISTCONV_WORLD_SIZE set
    and no rank variable inherited from the test's own environment; each rank writes its world
    size to its own file in ``out`` (two ranks printing to one pipe can interleave mid-line)."""
    code = (
        "import pathlib, sys; from distconv.runtime import detect_runtime as d; r = d(); "
        "pathlib.Path(sys.argv[1], f'rank{r.rank}').write_text(str(r.world_size))"
    )
    inherited = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "JOB_COMPLETION_INDEX", "MPI_LOCALRANKID")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in inherited and not k.startswith(("DISTCONV_", "OMPI_", "PMI_", "PMIX_"))
    }
    env.update(DISTCONV_WORLD_SIZE=world_size, PYTHONPATH=child_path())
    return subprocess.run(
        ["mpiexec", "-n", "2", sys.executable, "-c", code, str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )


@pytest.mark.mpi
def test_the_ranks_refuse_a_world_size_that_is_not_mpiexecs(tmp_path):
    """Under a real mpiexec -n 2 with DISTCONV_WORLD_SIZE=3 each rank stops, naming both."""
    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not on PATH")
    done = _under_mpiexec("3", tmp_path)
    assert done.returncode != 0, done
    assert "two sources disagree about the world size" in done.stdout + done.stderr, done
    assert list(tmp_path.iterdir()) == []
    done = _under_mpiexec("2", tmp_path)
    assert done.returncode == 0, done
    assert [p.read_text() for p in sorted(tmp_path.glob("rank*"))] == ["2", "2"]
