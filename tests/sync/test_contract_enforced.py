"""The sync contract, enforced alike on every transport in one process: LocalSync, a one-rank
MPISync, and a PServerSync on a real shard (127.0.0.1, port 0).

- A write into a fired gradient between ``backward`` and ``finish_step`` (a clip by hand, a
  ``zero_grad``) was ignored by LocalSync (applied already) and applied by the others; it now
  fails at the write, and the sync's close names the parameter and the supported route (of a
  ``zero_grad``, refused at once in words of its own, it raises that refusal).
- ``close()`` with a step open and nothing propagating: PServerSync and one-rank MPISync
  dropped the step without a word, LocalSync had applied it; now a SyncError on every one,
  raised once all is released.
- ``start_step`` before ``setup``: LocalSync and PServerSync took it and refused the first
  gradient as "not given to setup"; now refused at once, as MPISync did.
- A sync is a context manager, whose close sees the block's exception.

(Two ranks under a real ``mpiexec``: ``tests/mpi/test_contract_two_ranks.py``.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.network import Network
from distconv.optim import create_optimizer
from distconv.sync.base import SyncError, SyncStrategy, closing_error
from distconv.sync.local import LocalSync
from tests.sync.ps.ps_helpers import Shards, batches, insecure_worker, small_net

TRANSPORTS = ["local", "mpi", "pserver"]
#: what a refused write names as the supported route
ROUTE = "MPISync(grad_hook=...)"
STEP_WAY_OUT = "call finish_step() before close(), or abandon_step() where the step raised"


@pytest.fixture
def make_sync(request, tmp_path) -> Iterator[Callable[[], SyncStrategy]]:
    """Makes syncs of the test's transport (``request.param``); the shard, if any, is stopped
    after the test."""
    kind = request.param
    shards = Shards(tmp_path)
    try:
        if kind == "local":
            yield lambda: LocalSync(create_optimizer("sgd", lr=0.05))
        elif kind == "mpi":
            pytest.importorskip("mpi4py", reason="mpi4py is not installed")
            from distconv.sync.mpi import MPISync, SingleRankComm

            yield lambda: MPISync(create_optimizer("sgd", lr=0.05), comm=SingleRankComm())
        else:
            endpoints = shards.start(1, 1)
            yield lambda: insecure_worker(endpoints, timeout=20)
    finally:
        shards.stop()


def _feeds(x: np.ndarray, y: np.ndarray) -> dict[str, Arg]:
    return {"image": Arg(x, needs_grad=False), "label": Arg(ids=y, needs_grad=False)}


def _backward(net: Network, sync: SyncStrategy, x: np.ndarray, y: np.ndarray) -> None:
    """A step's start and its one pass, up to where a loop of one's own would clip."""
    sync.start_step(len(y))
    net.forward(_feeds(x, y))
    net.backward(sync, loss="loss", loss_scale=len(y))


def _scale_by_hand(net: Network) -> None:
    for p in net.parameters():
        p.grad *= 0.5


#: what the close raises of each write: its own words of a write that failed on numpy's
#: "read-only" (a scale by hand), or the zero_grad's own refusal, as it was raised (nothing
#: written: not "lost, applied, or raced the reduction")
CLOSED_ON = [
    (_scale_by_hand, ("the gradient of ", "was written after it fired and before", ROUTE)),
    (Network.zero_grad, ("zero_grad of ", "its gradient is read-only", ".finish_step() first")),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make_sync", TRANSPORTS, indirect=True)
@pytest.mark.parametrize(("write", "words"), CLOSED_ON, ids=["scale", "zero_grad"])
def test_a_write_between_backward_and_finish_step_is_refused_naming_the_parameter(
    make_sync, write, words
):
    net = small_net()
    before = [p.value.copy() for p in net.parameters()]
    (x, y), *_ = batches(1, 8)
    with pytest.raises(SyncError) as refused:
        with make_sync() as sync:
            sync.setup(net.parameters(), {"batch": 8})
            _backward(net, sync, x, y)
            write(net)
            sync.finish_step()  # not reached
    said = str(refused.value)
    assert all(w in said for w in words), said
    assert any(f" of {p.name!r}" in said for p in net.parameters()), said
    assert "read-only" in str(refused.value.__cause__)
    assert sync.closed and all(p.grad.flags.writeable for p in net.parameters())
    if isinstance(sync, LocalSync):  # the others applied nothing: the step never finished
        return
    assert all(np.array_equal(a, p.value) for a, p in zip(before, net.parameters()))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make_sync", TRANSPORTS, indirect=True)
def test_gradients_are_writable_again_once_the_step_ends_and_steps_go_on(make_sync):
    """finish_step, abandon_step and the next setup let go; a loop that clips nothing by hand
    trains as ever, and zeroes its gradients between steps (as the Trainer's fit does)."""
    net = small_net()
    data = batches(3, 8)
    with make_sync() as sync:
        sync.setup(net.parameters(), {"batch": 8})
        _backward(net, sync, *data[0])
        assert not any(p.grad.flags.writeable for p in net.parameters())
        sync.finish_step()
        assert all(p.grad.flags.writeable for p in net.parameters())
        net.zero_grad()
        _backward(net, sync, *data[1])
        sync.abandon_step()
        assert all(p.grad.flags.writeable for p in net.parameters())
        net.zero_grad()
        sync.setup(net.parameters(), {"batch": 8})
        _backward(net, sync, *data[2])
        sync.finish_step()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make_sync", TRANSPORTS, indirect=True)
def test_close_with_a_step_open_and_nothing_propagating_is_refused_after_releasing(make_sync):
    net = small_net()
    data = batches(2, 8)
    sync = make_sync()
    sync.setup(net.parameters(), {"batch": 8})
    _backward(net, sync, *data[0])
    sync.finish_step()
    _backward(net, sync, *data[1])
    with pytest.raises(SyncError, match="sync closed in the middle of step 1") as refused:
        sync.close()
    assert STEP_WAY_OUT in str(refused.value)
    assert sync.closed and all(p.grad.flags.writeable for p in net.parameters())
    sync.close()  # closed is closed: nothing more to say
    with pytest.raises(SyncError, match="called after close"):
        sync.start_step(8)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make_sync", TRANSPORTS, indirect=True)
def test_close_with_a_step_open_keeps_the_exception_that_propagates(make_sync):
    """A step that raised (no abandon_step by hand): the error goes on, not replaced."""
    net = small_net()
    (x, y), *_ = batches(1, 8)
    with pytest.raises(KeyError, match="the loop's own"):
        with make_sync() as sync:
            sync.setup(net.parameters(), {"batch": 8})
            _backward(net, sync, x, y)
            raise KeyError("the loop's own")
    assert sync.closed


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make_sync", TRANSPORTS, indirect=True)
def test_start_step_before_setup_is_refused_at_once(make_sync):
    with contextlib.closing(make_sync()) as sync:
        name = type(sync).__name__
        with pytest.raises(SyncError, match=f"{name}.start_step called before setup"):
            sync.start_step(8)


class SeesClosingError(LocalSync):
    """Records what its close saw propagating."""

    fired_gradients_untouched = True

    def close(self) -> None:
        self.seen = closing_error()
        super().close()


def test_a_with_block_closes_the_sync_and_its_close_sees_the_block_s_exception():
    with SeesClosingError(create_optimizer("sgd", lr=0.1)) as sync:
        assert not sync.closed
    assert sync.closed and sync.seen is None
    with pytest.raises(RuntimeError, match="in the block"):
        with SeesClosingError(create_optimizer("sgd", lr=0.1)) as sync:
            raise RuntimeError("in the block")
    assert sync.closed and isinstance(sync.seen, RuntimeError)


def test_gradient_accumulation_by_hand_adds_the_early_passes_and_holds_the_last():
    """The passes before the last fire to a no-op (the Trainer's keep_gradient): their
    gradients stay writable, for the next pass adds into them; the last pass's are held."""
    from distconv.parameter import keep_gradient

    net = small_net()
    (x, y), *_ = batches(1, 8)
    with LocalSync(create_optimizer("sgd", lr=0.05)) as sync:
        sync.setup(net.parameters(), {"batch": 8})
        sync.start_step(8)
        net.forward(_feeds(x[:4], y[:4]))
        net.backward(keep_gradient, loss="loss", loss_scale=4)
        assert all(p.grad.flags.writeable for p in net.parameters())
        net.forward(_feeds(x[4:], y[4:]))
        net.backward(sync, loss="loss", loss_scale=4)
        assert not any(p.grad.flags.writeable for p in net.parameters())
        sync.finish_step()


def test_a_layer_s_share_added_after_firing_is_refused_on_every_pass_not_only_the_first():
    """Only the pass that recorded the firing order was guarded: on a later one the late share
    went into the strategy's gradient unseen (kept for the next step, or lost)."""
    from distconv.network import NetworkError
    from tests.layer_mistakes import batches as mistake_batches
    from tests.layer_mistakes import build, step

    net = build("early")
    x, t = next(mistake_batches())
    net.forward({"x": Arg(x, needs_grad=False), "target": Arg(t, needs_grad=False)})
    net.backward(lambda p: None, loss="loss")  # records the order: later passes follow
    net.zero_grad()
    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    sync.setup(net.parameters())
    said = r"layer 'ss1' wrote into the gradient of 'ss1\.weight' after firing it"
    with pytest.raises(NetworkError, match=said):
        step(net, sync, x, t)  # abandoned there, as the Trainer does
    sync.close()
