"""Closed is closed, on every transport: after ``close()`` each call of ``NEEDS_OPEN`` raises a
``SyncError`` naming it, and closing again does nothing. Before, a closed ``LocalSync`` trained
on, a closed single-rank ``MPISync`` said "start_step called before setup", and a closed
``PServerSync`` raised ZeroMQ's "Socket operation on non-socket". Real shards on 127.0.0.1."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.sync.base import NEEDS_OPEN, SyncError, SyncStrategy
from distconv.sync.local import LocalSync

PS_TESTS = Path(__file__).resolve().parent / "ps"

#: each refused call, with arguments it would take on an open sync
CALLS = {
    "setup": lambda sync, net: sync.setup(net.parameters(), {}),
    "broadcast_parameters": lambda sync, net: sync.broadcast_parameters(),
    "start_step": lambda sync, net: sync.start_step(8),
    "prefetch": lambda sync, net: sync.prefetch({}),
    "finish_step": lambda sync, net: sync.finish_step(),
    "state_dict": lambda sync, net: sync.state_dict(),
    "load_state_dict": lambda sync, net: sync.load_state_dict({}),
    "refresh_parameters": lambda sync, net: sync.refresh_parameters(),
    "checkpoint_state": lambda sync, net: sync.checkpoint_state(),
    "save_remote_parts": lambda sync, net: sync.save_remote_parts(1),
    "allreduce_sum": lambda sync, net: sync.allreduce_sum([1.0]),
    "barrier": lambda sync, net: sync.barrier(),
    "all_equal": lambda sync, net: sync.all_equal({"batch": 8}),
}


@pytest.fixture
def ps_helpers():
    """The parameter-server tests' helpers: real shard processes, the small net, batches."""
    sys.path.insert(0, str(PS_TESTS))
    try:
        import ps_helpers

        yield ps_helpers
    finally:
        sys.path.remove(str(PS_TESTS))


@pytest.fixture
def make_sync(request, ps_helpers, tmp_path, monkeypatch):
    """``make_sync(transport)``: a strategy of that transport, world size 1 (MPI without
    mpi4py, as on a machine without it; the parameter server on a real shard)."""
    shards = ps_helpers.Shards(tmp_path)
    request.addfinalizer(shards.stop)

    def make(transport: str) -> SyncStrategy:
        optimizer = create_optimizer("adam", lr=0.01)
        if transport == "local":
            return LocalSync(optimizer)
        if transport == "mpi":
            monkeypatch.setitem(sys.modules, "mpi4py", None)
            monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
            from distconv.sync.mpi.sync import MPISync

            return MPISync(optimizer)
        return ps_helpers.insecure_worker(shards.start(1, 1), optimizer="adam", lr=0.01)

    return make


def test_the_calls_checked_here_are_all_that_are_refused():
    assert set(CALLS) == set(NEEDS_OPEN)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("transport", ["local", "mpi", "pserver"])
def test_a_closed_sync_refuses_every_call_by_name(transport, make_sync, ps_helpers):
    net, sync = ps_helpers.small_net(), make_sync(transport)
    sync.setup(net.parameters(), {})
    ps_helpers.train_steps(net, sync, ps_helpers.batches(2, 8))
    trained = {p.name: p.value.copy() for p in net.parameters()}
    sync.close()
    assert sync.closed
    sync.close()  # a script's own close, then its finally's: nothing happens
    name = type(sync).__name__
    for call, use in CALLS.items():
        with pytest.raises(SyncError, match=rf"^{name}\.{call}\(\) called after close\(\)"):
            use(sync, net)
    with pytest.raises(SyncError, match="called after close"):  # a whole step, as the Trainer
        ps_helpers.train_steps(net, sync, ps_helpers.batches(1, 8))
    for p in net.parameters():  # nothing trained on after close
        np.testing.assert_array_equal(p.value, trained[p.name])


@pytest.mark.timeout(60)
def test_a_closed_parameter_server_sync_refuses_its_own_calls_too(make_sync, ps_helpers):
    """``shard_stats`` asks every shard: after close it raised ZeroMQ's "Socket operation on
    non-socket", as every call did before, instead of naming the call."""
    net, sync = ps_helpers.small_net(), make_sync("pserver")
    sync.setup(net.parameters(), {})
    assert sync.shard_stats()[0]["errors"] == 0
    sync.close()
    assert sync.also_needs_open == ("shard_stats",)
    with pytest.raises(SyncError, match=r"^PServerSync\.shard_stats\(\) called after close\(\)"):
        sync.shard_stats()
    assert sync.traffic()["bytes_pulled"] >= 0  # a count kept here: still read after close


class _Parent(LocalSync):
    """A transport of a user's, with a close of its own."""

    def __init__(self, closes: list[str]) -> None:
        super().__init__(create_optimizer("sgd"))
        self.closes = closes

    def close(self) -> None:
        self.closes.append("parent close")


class _Recorded(_Parent):
    """Its subclass, whose close calls the parent's."""

    def __init__(self, closes: list[str], fail: bool = False) -> None:
        super().__init__(closes)
        self.fail = fail

    def barrier(self) -> None:  # an override that checks nothing by itself
        self.closes.append("barrier")

    def close(self) -> None:
        self.closes.append("own close")
        super().close()
        if self.fail:
            raise RuntimeError("the transport could not let go")


def test_a_subclass_gets_the_rule_for_what_it_defines_and_its_parents_close_still_runs():
    closes: list[str] = []
    sync = _Recorded(closes)
    sync.barrier()
    sync.close()
    sync.close()
    assert closes == ["barrier", "own close", "parent close"]  # once each
    with pytest.raises(SyncError, match=r"^_Recorded\.barrier\(\) called after close\(\)"):
        sync.barrier()


def test_a_close_that_raises_still_counts_as_closed():
    closes: list[str] = []
    sync = _Recorded(closes, fail=True)
    with pytest.raises(RuntimeError, match="could not let go"):
        sync.close()
    sync.close()  # the finally after it: not a second attempt
    assert closes == ["own close", "parent close"] and sync.closed
