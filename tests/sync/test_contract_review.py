"""Where the held gradients of a step that never ended go, and what a close leaves propagating.

A step's fired gradients stay read-only until it ends (``distconv.held_gradients``). A step
that never ends (a Ctrl-C mid-step in a notebook, the sync then dropped unclosed and a new one
made) must not leave the model's gradients read-only for the next sync; and a close with a
step open refuses only where nothing propagates, never in place of a ``sys.exit(0)``.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from distconv.network import Network
from distconv.optim import create_optimizer
from distconv.sync.base import SyncError, SyncStrategy
from distconv.sync.local import LocalSync
from tests.sync.ps.ps_helpers import Shards, batches, insecure_worker, small_net
from tests.sync.test_contract_enforced import (  # noqa: F401  (make_sync: a fixture used)
    ROUTE,
    TRANSPORTS,
    _backward,
    _feeds,
    make_sync,
)


def _set_up(net: Network) -> LocalSync:
    sync = LocalSync(create_optimizer("sgd", lr=0.05))
    sync.setup(net.parameters())
    return sync


def _writable(net: Network) -> list[bool]:
    return [bool(p.grad.flags.writeable) for p in net.parameters()]


@pytest.mark.timeout(60)
def test_a_new_sync_takes_the_gradients_a_dropped_sync_s_unended_step_held():
    net = small_net()
    (x, y), (x2, y2) = batches(2, 4)
    dropped = _set_up(net)
    _backward(net, dropped, x, y)  # then a Ctrl-C: no finish_step, no abandon_step, no close
    assert not any(_writable(net))  # held, as the contract says, while its step is open
    fresh = _set_up(net)
    fresh.start_step(len(y2))
    assert all(_writable(net)), "the dead step's hold left the new sync's gradients read-only"
    net.zero_grad()  # a loop that zeroes at its step's start
    before = [p.value.copy() for p in net.parameters()]
    net.forward(_feeds(x2, y2))
    net.backward(fresh, loss="loss", loss_scale=len(y2))
    fresh.finish_step()
    assert all(_writable(net))
    assert any(not np.array_equal(b, p.value) for b, p in zip(before, net.parameters()))
    fresh.close()
    dropped.abandon_step()  # the dead one, ended late, neither fails nor takes them back
    dropped.close()
    assert all(_writable(net))


@pytest.mark.timeout(60)
def test_a_clean_exit_mid_step_propagates_through_the_close_not_replaced_by_its_refusal():
    net = small_net()
    (x, y), *_ = batches(1, 4)
    with pytest.raises(SystemExit) as ended:
        with _set_up(net) as sync:
            _backward(net, sync, x, y)
            sys.exit(0)
    assert ended.value.code == 0
    assert sync.closed and all(_writable(net))


@pytest.mark.timeout(60)
def test_close_with_a_step_open_still_refuses_where_nothing_propagates():
    net = small_net()
    (x, y), *_ = batches(1, 4)
    sync = _set_up(net)
    _backward(net, sync, x, y)
    with pytest.raises(SyncError, match=r"in the middle of step 0 .*abandon_step\(\)"):
        sync.close()
    assert sync.closed and all(_writable(net))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("make_sync", TRANSPORTS, indirect=True)
def test_a_write_in_a_step_abandoned_in_its_except_is_named_at_close(make_sync):  # noqa: F811
    """The loop the open-step refusal asks for (abandon_step where the step raised): its
    abandon_step lets go of the gradients, and the close still names the write."""
    net = small_net()
    (x, y), *_ = batches(1, 8)
    with pytest.raises(SyncError, match="the gradient of 'conv1.weight' was written") as refused:
        with make_sync() as sync:
            sync.setup(net.parameters(), {"batch": 8})
            try:
                _backward(net, sync, x, y)
                for p in net.parameters():
                    p.grad *= 0.5  # a clip by hand
                sync.finish_step()
            except BaseException:
                sync.abandon_step()
                raise
    assert ROUTE in str(refused.value)
    assert "read-only" in str(refused.value.__cause__)
    assert sync.closed and all(_writable(net))


@pytest.mark.timeout(60)
def test_a_parameter_server_setup_that_failed_still_refuses_metrics_sums(tmp_path):
    """The parameter server serves sums and barriers once a setup completed (its own
    ``_set_up``); a setup that got as far as ending the step and then failed is not one."""
    net = small_net()
    shards = Shards(tmp_path)
    try:
        sync = insecure_worker(shards.start(1, 1), timeout=20)
        with pytest.raises(Exception, match="nope"):  # the chief's state: none of these names
            sync.setup(net.parameters(), {"batch": 8}, state={"nope": {"m": np.zeros(1)}})
        with pytest.raises(SyncError, match=r"rank 0: summing 1 value before setup"):
            sync.allreduce_sum([1.0])
        sync.close()
    finally:
        shards.stop()


class _OwnSetup(SyncStrategy):
    """A strategy of one's own whose setup skips the base's (one process: nothing to agree)."""

    def setup(self, params, config=None, state=None) -> None:
        self.params = list(params)

    def on_gradient(self, param) -> None:
        param.value -= 0.05 * param.grad
        param.grad[...] = 0

    def finish_step(self) -> None:
        pass

    def state_dict(self):
        return {}

    def load_state_dict(self, state) -> None:
        pass


@pytest.mark.timeout(60)
def test_a_setup_of_one_s_own_that_skips_the_base_s_lets_steps_start():
    net = small_net()
    (x, y), *_ = batches(1, 4)
    with _OwnSetup(create_optimizer("sgd", lr=0.05)) as sync:
        with pytest.raises(SyncError, match="start_step called before setup"):
            sync.start_step(len(y))
        sync.setup(net.parameters())
        _backward(net, sync, x, y)
        sync.finish_step()
