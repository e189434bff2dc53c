"""Another optimizer given to a sync between two fits (``sync.optimizer = ...``) starts every
parameter's state afresh, as a new torch optimizer does: LocalSync copied the old
optimizer's buffers by the new one's keys, a bare ``KeyError: 'm'`` (momentum, then Adam), and
kept the old velocity under a new momentum optimizer. MPISync inherits that state; it runs here
under ``mpiexec -n 2`` (this file is its script)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.local import LocalSync
from tests.mpi.common import mpiexec, run_mpi

#: per rank, the gradient of each step (MPISync averages them over the ranks' examples)
GRADS = [np.array([1.0, -2.0, 0.5]), np.array([3.0, 0.0, -1.0])]


def two_fits(sync, grads, examples: int, second: str) -> np.ndarray:
    """Fit one step with momentum (lr 1), give ``sync`` a new ``second`` optimizer, set it up
    again and fit one more step; the value of ``w``."""
    w = Parameter("w", np.zeros(3))
    for fit in range(2):
        if fit:
            sync.optimizer = create_optimizer(second, lr=0.5)
        sync.setup([w], {})
        sync.start_step(examples)
        w.grad[...] = grads
        sync.on_gradient(w)
        sync.finish_step()
    return w.value.copy()


def by_hand(second: str) -> np.ndarray:
    """One momentum step, then one step of a fresh ``second`` optimizer, as torch would."""
    w = np.zeros(3)
    grad = sum(GRADS) / len(GRADS)
    create_optimizer("momentum", lr=1.0).update(w, grad, {"velocity": np.zeros(3)})
    fresh = create_optimizer(second, lr=0.5)
    fresh.update(w, grad, fresh.init_state(w))
    return w


@pytest.mark.parametrize("second", ["adam", "momentum"])
def test_local_sync_starts_a_new_optimizers_state_afresh(second):
    sync = LocalSync(create_optimizer("momentum", lr=1.0))
    got = two_fits(sync, sum(GRADS), len(GRADS), second)
    np.testing.assert_allclose(got, by_hand(second), rtol=1e-15, atol=0)
    assert set(sync.state["w"]) == set(create_optimizer(second).init_state(np.zeros(1)))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("second", ["adam", "momentum"])
@pytest.mark.mpi
@pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed")
def test_mpi_sync_on_two_ranks_starts_a_new_optimizers_state_afresh(tmp_path, second):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    proc = run_mpi(["-n", "2", sys.executable, "-m", "mpi4py", __file__, str(tmp_path), second])
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in (0, 1):
        got = np.load(tmp_path / f"w{rank}.npy")
        np.testing.assert_allclose(got, by_hand(second), rtol=1e-15, atol=0)


def main() -> None:
    from distconv.sync.mpi import MPISync

    out, second = Path(sys.argv[1]), sys.argv[2]
    sync = MPISync(create_optimizer("momentum", lr=1.0), overlap=False, timeout=60)
    try:
        w = two_fits(sync, GRADS[sync.rank], 1, second)
    finally:
        sync.close()
    np.save(out / f"w{sync.rank}.npy", w)


if __name__ == "__main__":
    main()
