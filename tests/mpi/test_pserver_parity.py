"""The 2-rank MPI result equals the 2-worker parameter-server result (sync mode).

Skips until the parameter server (``distconv.sync.ps``) has landed and offers its test helper
``distconv.sync.ps.testing.train_two_workers(net_factory, train, optimizer) -> weights``.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tests.mpi.common import mpiexec, run_mpi, script, small_lenet, train

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed"),
    pytest.mark.skipif(
        importlib.util.find_spec("distconv.sync.ps") is None,
        reason="the parameter server (distconv.sync.ps) has not landed yet",
    ),
]


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_mpi_equals_parameter_server(tmp_path, optimizer):
    testing = pytest.importorskip(
        "distconv.sync.ps.testing", reason="distconv.sync.ps has no testing helper yet"
    )
    proc = run_mpi(["-n", "2", *script("run_train.py"), str(tmp_path), optimizer])
    assert proc.returncode == 0, proc.stderr
    mpi = np.load(tmp_path / "rank0.npz")
    ps = testing.train_two_workers(lambda: small_lenet(seed=0), train, optimizer)
    for name, value in ps.items():
        scale = max(np.abs(value).max(), np.abs(mpi[name]).max(), 1e-300)
        assert np.abs(mpi[name] - value).max() / scale <= 1e-10, name
