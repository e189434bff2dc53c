"""End to end: ``mpiexec -n 2 python -m mpi4py -m distconv train --sync mpi`` on the digits."""

from __future__ import annotations

import json
import sys

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.slow]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


@pytest.mark.timeout(900)
@pytest.mark.parametrize("grad_dtype", [None, "bfloat16"])
def test_two_ranks_reach_98_percent_on_the_digits(tmp_path, grad_dtype):
    command = ["-n", "2", sys.executable, "-m", "mpi4py", "-m", "distconv", "train"]
    command += ["--sync", "mpi", "--out", str(tmp_path / "run"), "--no-progress"]
    if grad_dtype is not None:  # half the bytes on the wire, still the accuracy
        pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes")
        command += ["--grad-dtype", grad_dtype]
    proc = run_mpi(command, timeout=850)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    assert last["world_size"] == 2 and last["epoch"] == 20
    assert last["test_acc"] >= 0.98, last
