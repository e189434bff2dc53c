"""The 2-rank MPI result equals the 2-worker parameter-server result (sync mode, 2 shards).

Both train the same float64 model on the same stride-sharded global batches (uneven last batch
included) from different starting points on rank 1, so both also show that rank 0's values win.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

from tests.mpi.common import NEEDS_MPIEXEC, REPO_ROOT, run_mpi, script, small_lenet, train, weights

pytestmark = [
    *NEEDS_MPIEXEC,
    pytest.mark.skipif(
        importlib.util.find_spec("distconv.sync.ps") is None,
        reason="the parameter server (distconv.sync.ps) is not here",
    ),
]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


@pytest.fixture
def ps_helpers():
    """The parameter-server tests' helpers (real shard processes, ranks in threads)."""
    sys.path.insert(0, str(REPO_ROOT / "tests" / "sync" / "ps"))
    try:
        import ps_helpers

        yield ps_helpers
    finally:
        sys.path.remove(str(REPO_ROOT / "tests" / "sync" / "ps"))


def pserver_weights(ps_helpers, tmp_path, optimizer: str) -> dict[str, np.ndarray]:
    from distconv.optim import create_optimizer
    from distconv.sync.ps.client import PServerSync

    shards = ps_helpers.Shards(tmp_path)
    try:
        endpoints = shards.start(2, workers=2)
        nets = [small_lenet(seed=0 if rank == 0 else 100 + rank) for rank in range(2)]

        def rank_fn(rank: int):
            sync = PServerSync(
                create_optimizer(optimizer),
                rank=rank,
                world_size=2,
                pservers=endpoints,
                timeout=30,
                insecure=True,
            )
            try:
                sync.setup(nets[rank].parameters(), {"batch_size": 16})
                train(nets[rank], sync, rank, 2)
                return weights(nets[rank])
            finally:
                sync.close()

        return ps_helpers.run_ranks(rank_fn, 2)[0]
    finally:
        shards.stop()


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_mpi_equals_parameter_server(tmp_path, ps_helpers, optimizer):
    proc = run_mpi(["-n", "2", *script("run_train.py"), str(tmp_path), optimizer])
    assert proc.returncode == 0, proc.stderr
    mpi = np.load(tmp_path / "rank0.npz")
    ps = pserver_weights(ps_helpers, tmp_path, optimizer)
    for name, value in ps.items():
        scale = max(np.abs(value).max(), np.abs(mpi[name]).max(), 1e-300)
        assert np.abs(mpi[name] - value).max() / scale <= 1e-10, name
