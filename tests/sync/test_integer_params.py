"""An integer parameter that trains is refused at setup, naming it and its dtype, on every
transport: it was taken, and every optimizer then failed on it at the first update (locally
and under MPI a numpy UFuncTypeError; on a parameter server the shard failed the job, "update
of parameter n failed on shard 0"). A static one trains nothing and is taken as before."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.local import LocalSync


@pytest.fixture
def no_mpi4py(monkeypatch):
    """MPISync of one rank without MPI (as tests/mpi/test_single_rank.py runs it)."""
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)


def _local():
    return LocalSync(create_optimizer("sgd"))


def _mpi():
    from distconv.sync.mpi import MPISync

    return MPISync(create_optimizer("sgd"))


@pytest.mark.parametrize("make", [_local, _mpi], ids=["local", "mpi"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
def test_an_integer_parameter_is_refused_at_setup_by_name(no_mpi4py, make, dtype):
    sync = make()
    try:
        params = [Parameter("w", np.zeros(3)), Parameter("n", np.zeros(4, dtype))]
        with pytest.raises(TypeError, match=f"parameter 'n' has dtype {np.dtype(dtype)}"):
            sync.setup(params, {})
    finally:
        sync.close()


@pytest.mark.parametrize("make", [_local, _mpi], ids=["local", "mpi"])
def test_a_static_integer_parameter_is_taken(no_mpi4py, make):
    sync = make()
    try:
        w, n = Parameter("w", np.zeros(3)), Parameter("n", np.arange(4), static=True)
        sync.setup([w, n], {})
        sync.start_step(1)
        w.grad[...] = 1
        sync.on_gradient(w)
        sync.finish_step()
        np.testing.assert_array_equal(n.value, np.arange(4))
        assert w.value[0] != 0
    finally:
        sync.close()


@pytest.mark.parametrize("make", [_local, _mpi], ids=["local", "mpi"])
def test_an_integer_parameter_unfrozen_after_setup_is_refused_by_name(no_mpi4py, make):
    """setup took the static one; unfreezing it after setup made it train, and the first
    update failed then: "UFuncTypeError: Cannot cast ufunc 'subtract' output ..." (review)."""
    sync = make()
    try:
        w, n = Parameter("w", np.zeros(3)), Parameter("n", np.arange(4), static=True)
        sync.setup([w, n], {})
        with pytest.raises(TypeError, match="parameter 'n' has dtype int64: only a floating"):
            n.set_static(False)
        assert n.static and n.grad is None
        n.set_static(True)  # freezing it again, or a float one either way, as before
        w.set_static(True)
        w.set_static(False)
    finally:
        sync.close()
