"""MPISync's device path under a real ``mpiexec -n 2``: buckets of device gradients staged
through host buffers, reduced, and copied back, with and without the communication thread, on
a native and a float16 wire.

No GPU on the CI machine: the ranks import the stand-in cupy of ``tests/mpi/fake_cupy`` (arrays
that, as cupy's, are never made numpy arrays implicitly nor meet them: ``test_fake_cupy.py``;
every host move logged); it stands in for cupy in this test only.
``tests/kernels/test_gpu.py`` runs the same script on cupy itself where a GPU is.
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


def device_texts(out, device: str) -> list[str]:
    """Run ``run_device_buckets.py`` on ``device`` over 2 ranks; what each rank wrote."""
    proc = run_mpi(["-n", "2", *script("run_device_buckets.py"), str(out), device], timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [(out / f"rank{r}.json").read_text() for r in range(2)]


def device_runs(out, device: str) -> list[list[dict]]:
    """Each rank's results of ``run_device_buckets.py`` on ``device`` (see :func:`device_texts`)."""
    return [json.loads(text) for text in device_texts(out, device)]


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


def test_ranks_on_different_devices_stop_at_setup_naming_it(tmp_path):
    """Rank 0 on a device, rank 1 on the host: a job of one, which setup refused to run. It
    trained, the ranks' optimizers computing on cupy's kernels and numpy's, which may round
    otherwise (test_gpu.py's device run matches the host's to float32's rounding, not
    bitwise), so the ranks' parameters could drift apart without a word; and a refused 16-bit
    wire stops the communication thread of a host rank where a device rank's goes on."""
    ranks = [json.loads(s) for s in device_texts(tmp_path, "mixed")]
    for rank, said in enumerate(ranks):
        assert "trained" not in said, said
        assert said["error"].startswith(f"JobMismatch: rank {rank} and rank {1 - rank} run "), said
        assert "sync.device: 'gpu' here, 'cpu' there" in said["error"] or (
            "sync.device: 'cpu' here, 'gpu' there" in said["error"]
        ), said
