"""Optimizer state held in this process (``LocalSync``, and ``MPISync``, which inherits its
state): a parameter cast since its state was made keeps that state in its new dtype, and a
model nobody holds any more is freed, with its state."""

from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.sync.base import SyncStrategy
from distconv.sync.local import LocalSync
from tests.mpi.common import small_lenet, train, weights


@pytest.fixture
def make_sync(monkeypatch):
    """``make_sync(kind)``: a fresh Adam strategy of one rank (MPI without mpi4py, as on a
    machine without it: the same code path as under ``mpiexec -n 1``)."""

    def make(kind: str) -> SyncStrategy:
        optimizer = create_optimizer("adam", lr=0.01)
        if kind == "local":
            return LocalSync(optimizer)
        monkeypatch.setitem(sys.modules, "mpi4py", None)
        monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
        from distconv.sync.mpi.sync import MPISync

        return MPISync(optimizer)

    return make


def _trained_in_float32(sync: SyncStrategy):
    net = small_lenet(seed=3)
    for p in net.parameters():
        p.cast(np.float32)
    sync.setup(net.parameters(), {})
    train(net, sync)
    return net


@pytest.mark.parametrize("kind", ["local", "mpi"])
def test_a_parameter_cast_on_its_sync_keeps_its_moments_in_the_new_dtype(make_sync, kind):
    """Before, the float32 moments stayed float32 under float64 weights: every later update
    went through float32, so training on in float64 was float32 training in disguise."""
    shared = make_sync(kind)
    net = _trained_in_float32(shared)
    for p in net.parameters():
        p.cast(np.float64)
    shared.setup(net.parameters(), {})
    for buffers in shared.state_dict().values():
        assert buffers["m"].dtype == buffers["v"].dtype == np.float64
        assert int(buffers["step"]) == 4  # the moments and the count go on, not from zero
    train(net, shared)
    # the reference: the same first part, then its state loaded by hand into a fresh float64
    # sync (load_state_dict casts into the buffers it made)
    first = make_sync(kind)
    reference = _trained_in_float32(first)
    for p in reference.parameters():
        p.cast(np.float64)
    second = make_sync(kind)
    second.setup(reference.parameters(), {})
    second.load_state_dict(first.state_dict())
    train(reference, second)
    ours, theirs = weights(net), weights(reference)
    for name in theirs:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    for sync in (shared, first, second):
        sync.close()


@pytest.mark.parametrize("kind", ["local", "mpi"])
def test_a_model_dropped_from_a_sync_is_freed_with_its_state(make_sync, kind):
    """A sweep on one sync: the last model's parameters were kept alive by the sync for names
    the next model lacks, and their state with them, for the life of the sync."""
    shared = make_sync(kind)
    first = small_lenet(seed=0, channels=(2, 3, 4))  # conv3 is the first model's alone
    shared.setup(first.parameters(), {})
    train(first, shared)
    dropped = weakref.ref(first.layers["conv3"].weight)
    del first
    second = small_lenet(seed=1)
    shared.setup(second.parameters(), {})
    gc.collect()  # a network's layers and parameters may hold each other in a cycle
    assert dropped() is None
    shared.setup(second.parameters(), {})  # a second fit: no state left of the first model
    assert set(shared.state_dict()) == {p.name for p in second.parameters()}
    shared.close()


@pytest.mark.parametrize("kind", ["local", "mpi"])
def test_a_parameter_given_a_value_of_another_shape_starts_afresh(make_sync, kind):
    """A table grown in place (a new vocabulary): numpy broadcast its one row of moments over
    every new row, where before the first update refused the old shape."""
    from distconv.parameter import Parameter

    table = Parameter("table", np.zeros((1, 3)))
    sync = make_sync(kind)
    sync.setup([table], {})
    sync.start_step(1)
    table.grad[...] = 1.0
    table.inc_update(sync)
    sync.finish_step()
    assert sync.state_dict()["table"]["m"].any()
    table.value, table.grad = np.zeros((4, 3)), np.zeros((4, 3))
    sync.setup([table], {})
    state = sync.state_dict()["table"]
    assert state["m"].shape == (4, 3) and not state["m"].any() and int(state["step"]) == 0
    sync.close()
