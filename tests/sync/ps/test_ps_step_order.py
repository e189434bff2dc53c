"""PServerSync holds a worker to the step's order as LocalSync does: a gradient
outside a step, a parameter fired twice in one step, one not given to setup (another model's
of the same name), and a finish_step without its start_step are refused at once, in
LocalSync's words. The first was pushed with the last step's number and example count, the
second refused by the shard at finish_step ("parameters [0, 0] are none or repeat"), the
third pushed into the setup parameter's blocks (whose value took the other model's update),
and the last sent whatever was queued."""

from __future__ import annotations

import copy
import signal

import numpy as np
import pytest
from ps_helpers import insecure_worker

from distconv.optim import SGD
from distconv.parameter import Parameter
from distconv.sync.base import SyncError
from distconv.sync.ps.client import PServerSync

OUTSIDE = r"call start_step\(examples\) before backward, finish_step\(\) after it$"


@pytest.mark.timeout(60)
def test_a_gradient_out_of_order_is_refused_at_once_in_local_sync_words(shards):
    (endpoint,) = shards.start(1, workers=1)
    a, b = Parameter("a", np.zeros(3)), Parameter("b", np.zeros(2))
    other_a = Parameter("a", np.zeros(3))  # another model's parameter of the same name
    sync = insecure_worker([endpoint], lr=1.0)
    try:
        sync.setup([a])
        a.grad[...] = 1.0
        with pytest.raises(SyncError, match=rf"^gradient of 'a' arrived outside a step: {OUTSIDE}"):
            sync.on_gradient(a)
        with pytest.raises(SyncError, match=r"^PServerSync.finish_step\(\) without start_step"):
            sync.finish_step()
        sync.start_step(1)
        sync.on_gradient(a)
        with pytest.raises(SyncError, match=r"^parameter 'a' fired twice in one step$"):
            sync.on_gradient(a)
        with pytest.raises(SyncError, match=r"^gradient of 'b', which was not given to setup$"):
            sync.on_gradient(b)
        other_a.grad[...] = 5.0
        with pytest.raises(
            SyncError,
            match=r"^gradient of 'a', which was not given to setup \(a parameter of that name "
            r"was: another model's\)$",
        ):
            sync.on_gradient(other_a)
        sync.finish_step()
        assert sync.push_messages == 1  # nothing refused left: one push, the step's own
        np.testing.assert_array_equal(a.value, -1.0)  # SGD, lr 1, one example: one update
        np.testing.assert_array_equal(other_a.value, 0.0)
        with pytest.raises(SyncError, match=r"without start_step"):  # the step is over
            sync.finish_step()
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_an_abandoned_step_refuses_its_gradients_until_the_next_start(shards):
    (endpoint,) = shards.start(1, workers=1)
    a = Parameter("a", np.zeros(3))
    sync = insecure_worker([endpoint], lr=1.0)
    try:
        sync.setup([a])
        sync.start_step(1)
        sync.abandon_step()
        a.grad[...] = 1.0
        with pytest.raises(SyncError, match=r"arrived outside a step"):
            sync.on_gradient(a)
        sync.start_step(1)
        sync.on_gradient(a)
        sync.finish_step()
        np.testing.assert_array_equal(a.value, -1.0)
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_an_abandoned_steps_queued_gradients_do_not_go_out_with_the_next_step(shards):
    """abandon_step lets go of the step's queued pushes, as LocalSync's next step carries
    nothing of the last: they went out with the next step's, and the shard refused the push
    ("parameters [0, 0] are none or repeat"); the step after them is the step's own."""
    (endpoint,) = shards.start(1, workers=1)
    a = Parameter("a", np.zeros(3))
    sync = insecure_worker([endpoint], lr=1.0)  # 1 MiB push_bytes: the gradient stays queued
    try:
        sync.setup([a])
        sync.start_step(1)
        a.grad[...] = 5.0
        sync.on_gradient(a)
        assert sync.push_messages == 0
        sync.abandon_step()
        sync.start_step(1)
        a.grad[...] = 1.0
        sync.on_gradient(a)
        sync.finish_step()
        assert sync.push_messages == 1  # the new step's push alone
        np.testing.assert_array_equal(a.value, -1.0)  # its gradient, not the abandoned 5
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_an_abandoned_steps_sent_push_stays_applied_as_local_sync_applies_it(shards):
    """What docs/architecture.md says of abandon_step: a push already sent (push_bytes 0) was
    applied by its shard, as LocalSync applies each gradient as it comes; only its reply is
    dropped, and the next step's reply brings the worker's value level with the shard's."""
    (endpoint,) = shards.start(1, workers=1)
    a = Parameter("a", np.zeros(3))
    sync = insecure_worker([endpoint], lr=1.0, push_bytes=0)  # each gradient leaves at once
    try:
        sync.setup([a])
        sync.start_step(1)
        a.grad[...] = 5.0
        sync.on_gradient(a)
        assert sync.push_messages == 1
        sync.abandon_step()
        np.testing.assert_array_equal(a.value, 0.0)  # its reply is not written
        sync.start_step(1)
        a.grad[...] = 1.0
        sync.on_gradient(a)
        sync.finish_step()
        np.testing.assert_array_equal(a.value, -6.0)  # the abandoned 5, then the next step's 1
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_an_abandoned_push_still_on_its_way_carries_its_own_gradient(shards):
    """A push goes without a copy: ZeroMQ reads the gradient's own memory while it sends. The
    test above once read -2.0 on a loaded machine: its abandoned push had not left yet when
    the next step wrote 1.0 into the gradient, so it carried 1.0. Here the shard
    is stopped, so the push (48 MB, more than the sockets' buffers) cannot leave until after
    the next gradient is written: every element must still take the abandoned 5."""
    (endpoint,) = shards.start(1, workers=1)
    shard = shards.procs[-1]
    a = Parameter("a", np.zeros(6_000_000))
    sync = insecure_worker([endpoint], lr=1.0, push_bytes=0, block_bytes=12_000_000)
    try:
        sync.setup([a])
        shard.send_signal(signal.SIGSTOP)  # it reads nothing: the push stays in ZeroMQ
        try:
            sync.start_step(1)
            a.grad[...] = 5.0
            sync.on_gradient(a)
            assert sync.push_messages == 1
            sync.abandon_step()
            a.grad[...] = 1.0  # the next step's gradient, while the push is on its way
        finally:
            shard.send_signal(signal.SIGCONT)
        sync.start_step(1)
        sync.on_gradient(a)
        sync.finish_step()
        assert np.unique(a.value).tolist() == [-6.0]  # the abandoned 5, then the next 1
    finally:
        sync.close()


@pytest.mark.timeout(60)
def test_a_gradient_after_close_mid_step_is_refused_as_local_sync_refuses_it(shards):
    """close() with a step under way is refused, yet closes (the contract, as LocalSync and
    MPISync hold it): a gradient handed in after it was taken, queued or sent on a closed
    socket, and is now refused, naming close()."""
    (endpoint,) = shards.start(1, workers=1)
    a = Parameter("a", np.zeros(3))
    sync = insecure_worker([endpoint], lr=1.0, push_bytes=0)
    sync.setup([a])
    sync.start_step(1)
    with pytest.raises(SyncError, match=r"closed in the middle of step"):
        sync.close()
    a.grad[...] = 1.0
    with pytest.raises(SyncError, match=r"^gradient of 'a' arrived after close\(\): make a new"):
        sync.on_gradient(a)
    assert sync.push_messages == 0
    np.testing.assert_array_equal(a.value, 0.0)


def _local_words_for_a_step_inside_another() -> str:
    """What LocalSync says to a start_step inside an unfinished step, as PServerSync says it."""
    from distconv.optim import create_optimizer
    from distconv.sync.local import LocalSync

    local = LocalSync(create_optimizer("sgd", lr=1.0))
    local.setup([Parameter("a", np.zeros(3))])
    local.start_step(1)
    with pytest.raises(SyncError) as refused:
        local.start_step(1)
    return str(refused.value).replace("LocalSync.", "PServerSync.")


@pytest.mark.timeout(60)
def test_a_step_started_inside_another_is_refused_and_the_open_step_goes_on(shards):
    """start_step twice without finish_step (accumulation written as a step per pass) was
    taken: the first step's queued gradient went out with the second, under its number and
    example count. It is refused in LocalSync's words; the open step keeps its examples."""
    (endpoint,) = shards.start(1, workers=1)
    a, b = Parameter("a", np.zeros(3)), Parameter("b", np.zeros(2))
    sync = insecure_worker([endpoint], lr=1.0)
    try:
        sync.setup([a, b])
        sync.start_step(1)
        a.grad[...] = 1.0
        sync.on_gradient(a)
        with pytest.raises(SyncError) as refused:
            sync.start_step(4)
        assert str(refused.value) == _local_words_for_a_step_inside_another()
        assert str(refused.value).startswith("PServerSync.start_step() while a step is unfinished")
        b.grad[...] = 1.0
        sync.on_gradient(b)
        sync.finish_step()
        assert sync.push_messages == 1  # one step, one push
        np.testing.assert_array_equal(a.value, -1.0)  # its one example, not 4: lr 1 / 1
        np.testing.assert_array_equal(b.value, -1.0)
        sync.start_step(1)  # after finish_step a step starts, as after abandon_step and setup
        sync.abandon_step()
        sync.start_step(1)
        sync.setup([a, b])
        sync.start_step(1)
        sync.finish_step()
    finally:
        sync.close()


class SnapshotInFinish(PServerSync):
    """Keeps a copy of itself made inside its finish_step (a snapshot of the step's end)."""

    def finish_step(self) -> None:
        super().finish_step()
        self.snapshot = copy.copy(self)


@pytest.mark.timeout(60)
def test_a_setup_ends_the_abandoned_steps_of_a_copy_made_inside_finish_step(shards):
    """The copy holds the finish_step wrapper's flag as set: each abandon_step of it counted
    as nested and ended no step, so a gradient after it was pushed, outside any step, and the
    next start_step refused; the base's setup clears the flag, the client's did not."""
    (endpoint,) = shards.start(1, workers=1)
    a = Parameter("a", np.zeros(3))
    sync = SnapshotInFinish(SGD(lr=1.0), rank=0, world_size=1, pservers=[endpoint], insecure=True)
    try:
        sync.setup([a])
        sync.start_step(1)
        sync.finish_step()
        copied = sync.snapshot
        copied.setup([a])
        copied.start_step(1)
        copied.abandon_step()
        a.grad[...] = 1.0
        with pytest.raises(SyncError, match=rf"^gradient of 'a' arrived outside a step: {OUTSIDE}"):
            copied.on_gradient(a)
        copied.start_step(1)
    finally:
        sync.close()
