"""A PyTorch-style ``zero_grad`` while a sync's step holds the gradients read-only (a backward
fired them, and no ``finish_step`` or ``abandon_step`` ended the step: it raised, or was
interrupted) is refused in distconv's words, naming the parameter, the sync and the way on,
on every transport in one process (LocalSync, a one-rank MPISync, a PServerSync on a real
shard). It failed with numpy's bare "assignment destination is read-only"."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from tests.sync.ps.ps_helpers import small_net
from tests.sync.test_contract_enforced import TRANSPORTS
from tests.sync.test_contract_enforced import make_sync as _make_sync

make_sync = _make_sync  # the fixture: a sync of the test's transport, its shard stopped after

pytestmark = pytest.mark.timeout(60)

#: the refusal's words (not imported from the code it tests); the class name is filled in
REFUSED = (
    r"^zero_grad of '[\w.]+': its gradient is read-only, fired to {0} in a step that is "
    r"unfinished, and the sync's until that step ends \(on the wire, or applied\): "
    r"call {0}\.finish_step\(\) first, or {0}\.abandon_step\(\) where the step raised$"
)


def _backward_left_open(net, sync) -> None:
    """A step whose backward fired every gradient, and that nothing ended (as where the code
    after backward raised, or a Ctrl-C came)."""
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((8, 1, 8, 8)), rng.integers(0, 4, 8)
    sync.start_step(8)
    net.forward({"image": Arg(x, needs_grad=False), "label": Arg(ids=y, needs_grad=False)})
    net.backward(sync, loss="loss", loss_scale=8)


@pytest.mark.parametrize("make_sync", TRANSPORTS, indirect=True)
def test_a_network_zero_grad_in_an_unfinished_step_names_the_way_on(make_sync):
    net, sync = small_net(), make_sync()
    with sync:  # closed however the test ends: the shard's worker never left waiting
        sync.setup(net.parameters())
        _backward_left_open(net, sync)
        owner = type(sync).__name__
        with pytest.raises(SyncError, match=REFUSED.format(owner)) as refused:
            net.zero_grad()
        assert "read-only" in str(refused.value.__cause__)  # numpy's, kept as the cause
        sync.abandon_step()  # the way on: the gradients are the script's again
        net.zero_grad()
    assert all(not p.grad.any() for p in net.parameters())


@pytest.mark.parametrize("make_sync", ["local"], indirect=True)
def test_a_parameters_zero_grad_is_refused_and_after_finish_step_clears(make_sync):
    net, sync = small_net(), make_sync()
    with sync:
        sync.setup(net.parameters())
        _backward_left_open(net, sync)
        first = net.parameters()[0]
        with pytest.raises(SyncError, match=REFUSED.format("LocalSync")):
            first.zero_grad()
        sync.finish_step()
        first.grad[...] = 1.0  # writable again
        first.zero_grad()
        assert not first.grad.any()


@pytest.mark.parametrize("make_sync", TRANSPORTS, indirect=True)
def test_the_syncs_close_raises_the_refusal_as_it_is(make_sync):
    """The close a ``with`` block ends in raises the refusal itself: nothing was written. It
    raised its words of a write in the window (``tests/sync/test_contract_enforced.py``), "such
    a write was lost, applied, or raced the reduction", from the refusal: under MPI the rank's
    one line (``tests/test_zero_grad_mid_step.py``)."""
    net, sync = small_net(), make_sync()
    with pytest.raises(SyncError, match=REFUSED.format(type(sync).__name__)) as closed:
        with sync:
            sync.setup(net.parameters())
            _backward_left_open(net, sync)
            net.zero_grad()
    assert "read-only" in str(closed.value.__cause__)  # numpy's, kept as the cause
    assert sync.closed and all(p.grad.flags.writeable for p in net.parameters())


def test_a_read_only_gradient_no_sync_holds_keeps_numpys_error():
    p = Parameter("w", np.zeros(3))
    p.grad.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        p.zero_grad()
