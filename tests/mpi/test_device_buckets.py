"""MPISync's device path under a real ``mpiexec -n 2``: buckets of device gradients staged
through host buffers, reduced, and copied back, with and without the communication thread, on
a native and a float16 wire.

No GPU on the CI machine: the ranks import the stand-in cupy of ``tests/mpi/fake_cupy`` (numpy
arrays that refuse to meet host arrays, as cupy's do, and log every host move); it stands in
for cupy in this test only. ``tests/kernels/test_gpu.py`` runs the same script on cupy itself
where a GPU is.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: the device buckets' sizes (elements) in layout order: "c", "b" (float32), "a"
BUCKETS = [6, 5, 7]


def device_runs(out, device: str) -> list[list[dict]]:
    """Run ``run_device_buckets.py`` on ``device`` over 2 ranks; each rank's results."""
    proc = run_mpi(["-n", "2", *script("run_device_buckets.py"), str(out), device], timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def check_device_runs(ranks: list[list[dict]], rtol: float = 0.0) -> None:
    """Every configuration ended on the device as on the host (to ``rtol``: a GPU's kernels
    may round otherwise than numpy's; 0, bitwise), bitwise the same on both ranks (rank 1
    started elsewhere: the broadcast reached device parameters), and trained."""
    for mine, other in zip(*ranks):
        config, device, host = mine["config"], mine["device"], mine["host"]
        assert device == other["device"] and host == other["host"], config
        for name, values in host.items():
            np.testing.assert_allclose(device[name], values, rtol=rtol, atol=0, err_msg=config)
        assert not np.allclose(host["c"], 0.5)  # it trained


def test_device_buckets_end_as_host_buckets_on_every_rank(tmp_path):
    ranks = device_runs(tmp_path, "fake")
    check_device_runs(ranks)
    for result in ranks[0] + ranks[1]:
        moves = result["moves"]
        assert all(main for _, _, main in moves), "the device was used off the main thread"
        sets = [size for what, size, _ in moves if what == "set"]
        assert sets == BUCKETS * 3, result["config"]  # each bucket back once a step
        steps = moves[moves.index(["set", 6, True]) - 3 :]
        gets = [size for what, size, _ in steps if what == "get"][:9]
        assert gets == BUCKETS * 3, result["config"]  # each bucket staged once a step
