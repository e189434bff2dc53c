"""``distconv evaluate`` of runs of two ranks: two parameter-server workers with two shards
(``distconv-launch local``) and ``mpiexec -n 2``. One process, no server: the chief's part
holds every weight. The accuracy is the run's exactly; the loss up to float32 sums taken in
another order (the ranks summed their stride shares); a shard's part is refused by name."""

from __future__ import annotations

import sys

import pytest

from tests.launcher.conftest import own_home  # noqa: F401  (its launches' HOME: their own)
from tests.launcher.launch_cli import launch
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi
from tests.test_evaluate_cmd import TRAIN, evaluated, last_metrics, refused

pytestmark = pytest.mark.timeout(240)


def _assert_the_run_s_numbers(got: dict, line: dict) -> None:
    assert got["test_acc"] == line["test_acc"]
    assert got["test_loss"] == pytest.approx(line["test_loss"], rel=1e-6)
    assert (got["step"], got["seed"], got["examples"]) == (line["step"], 0, 359)


@pytest.mark.usefixtures("own_home")
def test_a_two_worker_two_shard_pserver_run(tmp_path):
    out = tmp_path / "ps"
    done = launch("local", "--workers", "2", "--servers", "2", "--insecure", "--run-dir",
                  str(tmp_path / "job"), "--", *TRAIN, "--out", str(out), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    line = last_metrics(out)
    assert line["world_size"] == 2
    _assert_the_run_s_numbers(evaluated(out), line)
    part = out / "pserver-shard0-steplast.safetensors"
    said = refused(part, cwd=tmp_path)
    assert said.startswith(
        f"distconv evaluate: error: --from {part}: a parameter-server shard's checkpoint part"
    )


@NEEDS_MPIEXEC[0]  # marked mpi
@NEEDS_MPIEXEC[1]  # skipped where there is no mpiexec
def test_an_mpi_run_of_two_ranks(tmp_path):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    out = tmp_path / "mpi"
    command = ["-n", "2", sys.executable, "-m", "mpi4py", "-m", "distconv", "train"]
    proc = run_mpi([*command, "--sync", "mpi", *TRAIN, "--out", str(out)], timeout=200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = last_metrics(out)
    assert line["world_size"] == 2
    _assert_the_run_s_numbers(evaluated(out), line)
