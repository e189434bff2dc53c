"""The Network's checks of what a layer of one's own fires in backward, through LocalSync: a
parameter fired twice in one pass, a gradient of another shape or dtype, a share added after
firing. The same mistakes under MPISync and the parameter server:
``tests/mpi/test_layer_mistakes.py``, ``tests/sync/ps/test_ps_layer_mistakes.py``."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.arg import Arg
from distconv.layers.base import LayerError
from distconv.network import NetworkError
from distconv.optim import create_optimizer
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from distconv.trainer import Trainer
from tests.layer_mistakes import ScaleShift, batches, build, local_run, step, train, trained_as


def test_a_parameter_fired_twice_is_refused_by_the_network_before_the_sync_takes_it():
    """The sync refused it first ("parameter 'ss1.bias' fired twice in one step"), naming
    neither the layer nor the rule; now the network does, and the sync never sees the second
    fire: the bias took one update, as a correct layer's first step gives it."""
    net = build("twice")
    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    sync.setup(net.parameters())
    before = net["ss1"].bias.value.copy()
    with pytest.raises(NetworkError) as caught:
        train(net, sync)
    said = str(caught.value)
    assert "'ss1.bias'" in said and "fired twice in one backward pass" in said, said
    assert "'ss1'" in said and "once per pass, after its last user" in said, said
    right = build()
    fine = LocalSync(create_optimizer("sgd", lr=0.1))
    fine.setup(right.parameters())
    step(right, fine, *next(batches()))  # a correct layer's first step
    assert not np.array_equal(before, right["ss1"].bias.value)
    np.testing.assert_array_equal(net["ss1"].bias.value, right["ss1"].bias.value)


@pytest.mark.parametrize(
    ("mistake", "has"),
    [
        ("rebind_shape", "shape (3, 1) and dtype float64"),
        ("rebind16", "shape (3,) and dtype float16"),
    ],
)
def test_a_gradient_replaced_by_another_shape_or_dtype_is_named_with_its_layer(mistake, has):
    """LocalSync failed in numpy's words (another shape: "non-broadcastable output operand",
    naming nothing) or trained on in float16 without a word."""
    with pytest.raises(NetworkError) as caught:
        local_run(mistake)
    said = str(caught.value)
    assert "gradient of 'ss1.bias'" in said and "layer 'ss1'" in said, said
    assert f"{has}; it must have shape (3,) and dtype float64" in said, said


def test_a_gradient_rebound_to_its_own_shape_and_dtype_trains_as_one_added_in_place():
    """``p.grad = p.grad + g`` is another array, of the right shape and dtype: taken."""
    rebound, _ = local_run("rebind")
    right, _ = local_run(None)
    assert rebound.keys() == right.keys()
    for name, value in right.items():
        np.testing.assert_array_equal(rebound[name], value, err_msg=name)


def early_refusal(said: str) -> bool:
    """Whether ``said`` is the Network's refusal of ``ss1``'s share added after firing."""
    return "layer 'ss1' wrote into the gradient of 'ss1.weight' after firing it" in said


def test_a_share_added_after_firing_is_refused_at_the_write_naming_layer_and_parameter():
    """LocalSync applied the weight without the share, which the next step then added in;
    by hand nothing said so, and the Trainer blamed the strategy ("LocalSync.finish_step()
    left the gradient of 'ss1.weight' nonzero")."""
    with pytest.raises(NetworkError) as caught:
        local_run("early")
    assert early_refusal(str(caught.value)), caught.value
    assert "once per pass, after its last user" in str(caught.value)


def test_the_trainer_refuses_a_share_added_after_firing_in_the_networks_words(tmp_path):
    x, t = next(batches())
    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    trainer = Trainer(build("early"), sync, batch_size=4, out_dir=tmp_path, progress=False)
    with pytest.raises(NetworkError) as caught:
        trainer.fit({"x": x, "target": t}, epochs=1)
    assert early_refusal(str(caught.value)), caught.value


def test_a_correct_layer_s_gradients_are_held_on_every_pass_and_writable_once_it_ends():
    """A correct layer trains as ever, and each gradient is writable again once its step
    ended. A shipped strategy holds what fired on every pass, not only the first (which
    records the firing order): read-only from backward to finish_step on a later pass too.
    (A layer's late share on such a pass: test_contract_enforced's every-pass test.)"""
    net, sync = build(), LocalSync(create_optimizer("sgd", lr=0.1))
    sync.setup(net.parameters())
    train(net, sync)
    assert net.firing_order is not None  # recorded: the next pass is a later one
    assert all(p.grad.flags.writeable for p in sync.params)
    x, t = next(batches())
    sync.start_step(len(x))
    net.forward({"x": Arg(x, needs_grad=False), "target": Arg(t, needs_grad=False)})
    net.backward(sync, loss="loss", loss_scale=len(x))
    assert not any(p.grad.flags.writeable for p in sync.params)
    sync.finish_step()
    assert all(p.grad.flags.writeable for p in sync.params)


def test_a_callback_of_ones_own_is_not_guarded():
    """It may hand the gradient to a thread that writes into it while backward runs (the
    contract lets it): the guard would refuse that write; the gradient checks catch the
    mistake there (check_network_grad)."""
    net = build("early")
    x, t = next(batches())
    net.forward({"x": Arg(x, needs_grad=False), "target": Arg(t, needs_grad=False)})
    net.backward(lambda p: None, loss="loss")  # the late share written: no refusal
    assert net.firing_order is not None and net["ss1"].weight.grad.flags.writeable


class ThreadedLocal(LocalSync):
    """A subclass, as one that adds a thread writing fired gradients would be: it says
    nothing of them, so it is not guarded."""


class PromisingLocal(LocalSync):
    """A subclass that keeps LocalSync's promise, and says so again."""

    fired_gradients_untouched = True


@pytest.mark.parametrize("strategy, guarded", [(ThreadedLocal, False), (PromisingLocal, True)])
def test_a_subclass_is_guarded_only_where_its_own_body_says_so(strategy, guarded):
    """The promise is read on the class itself, never inherited: matched by class name
    before, a user's class called LocalSync in a module of its own was not guarded, nor any
    subclass that kept the promise."""
    net = build("early")
    sync = strategy(create_optimizer("sgd", lr=0.1))
    sync.setup(net.parameters())
    x, t = next(batches())
    if guarded:
        with pytest.raises(NetworkError) as caught:
            step(net, sync, x, t)
        assert early_refusal(str(caught.value)), caught.value
    else:
        step(net, sync, x, t)  # the late share written: no refusal from the Network
        assert net.firing_order is not None and net["ss1"].weight.grad.flags.writeable


class EarlyThroughAView(ScaleShift):
    """A ScaleShift whose weight fires before its share is in, the share added through a
    view of the gradient taken before the fire (as a layer adding through a reshape): the
    read-only flag is the gradient's own, so no guard sees this write."""

    def _backward(self, dz, callback):
        (x,) = self.inputs
        share = self.weight.grad[...]  # a view, made while the gradient is still writable
        self.bias.grad += dz.sum(axis=0)
        self.bias.inc_update(callback)
        self.weight.inc_update(callback)
        share += (dz * x.value).sum(axis=0)


def test_an_unguarded_share_after_firing_is_blamed_on_the_layer_for_a_shipped_strategy(tmp_path):
    """Where no guard saw the write (through a view the flag does not reach, as here; a
    device's gradients), LocalSync's first step finds the share left in the gradient. It
    blamed the strategy, which is distconv's own and zeroes every gradient it takes."""
    net = build()
    net.layers["ss1"].__class__ = EarlyThroughAView
    x, t = next(batches())
    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    trainer = Trainer(net, sync, batch_size=4, out_dir=tmp_path, progress=False)
    with pytest.raises(SyncError) as caught:
        trainer.fit({"x": x, "target": t}, epochs=1)
    said = str(caught.value)
    assert "LocalSync.finish_step() left the gradient of 'ss1.weight' nonzero" in said, said
    assert (
        "a layer most likely added to it after firing it" in said and "zeroes each" not in said
    ), said


class EarlyThroughACall(ScaleShift):
    """A ScaleShift whose weight fires before its share is in, the share added into a
    gradient reached through a call: which one, the line does not say without running it."""

    def own_weight(self):
        return self.weight

    def _backward(self, dz, callback):
        (x,) = self.inputs
        self.bias.grad += dz.sum(axis=0)
        self.bias.inc_update(callback)
        self.weight.inc_update(callback)
        self.own_weight().grad += (dz * x.value).sum(axis=0)


def test_a_late_write_into_a_gradient_the_line_does_not_name_blames_every_fired_one():
    """A line read that writes a ``.grad`` it does not say whose is still a write into a
    fired gradient: each is named, as one of them (only an unread line blames none)."""
    with pytest.raises(NetworkError) as caught:
        trained_as(EarlyThroughACall, "call", build())
    assert "layer 'ss1' wrote into the gradient of 'ss1.bias' or 'ss1.weight'" in str(
        caught.value
    ), caught.value


class ReadOnlyScratch(ScaleShift):
    """A correct ScaleShift that, after firing, writes into a read-only array of its own (in
    the way ``form`` names; reading a fired gradient in ``copyto_read``): a mistake of another
    kind, whose own error (numpy's, in a LayerError) must stand."""

    form = "slice"

    def _backward(self, dz, callback):
        super()._backward(dz, callback)
        scratch = np.broadcast_to(np.zeros(dz.shape[1]), dz.shape)  # read-only
        if self.form == "slice":
            scratch[...] = dz
        elif self.form == "copyto":
            np.copyto(scratch, dz)
        elif self.form == "fill":
            scratch.fill(0.0)
        elif self.form == "copyto_read":
            np.copyto(scratch, self.bias.grad)
        elif self.form == "ufunc_out":
            np.negative(dz, scratch)


@pytest.mark.parametrize("form", ["slice", "copyto", "fill", "copyto_read", "ufunc_out"])
def test_a_write_into_another_read_only_array_after_firing_is_not_blamed_on_a_gradient(form):
    """The guard read any "read-only" error after a fire as a write into a fired gradient and
    named every one the layer had fired; the line wrote into an array of the layer's own.
    ``np.copyto(a, ...)``, ``a.fill(...)`` and ``np.negative(x, a)`` were still blamed on
    every fired gradient (their written array unread), and a copy from a fired gradient into
    the array on that one."""
    net = build()
    with pytest.raises(LayerError) as caught:
        trained_as(ReadOnlyScratch, form, net)
    assert not isinstance(caught.value, NetworkError), caught.value
    said = str(caught.value)
    assert "'ss1': backward: " in said and "is read-only" in said, said
    assert all(p.grad.flags.writeable for p in net.parameters())


class FilledAfterFiring(ScaleShift):
    """A ScaleShift that clears its weight's gradient after firing it, in the ways a line
    reads that the guard must still name."""

    form = "fill"

    def _backward(self, dz, callback):
        super()._backward(dz, callback)
        if self.form == "fill":
            self.weight.grad.fill(0.0)
        else:
            np.copyto(self.weight.grad, 0.0)


@pytest.mark.parametrize("form", ["fill", "copyto"])
def test_a_fired_gradient_cleared_by_a_call_is_named(form):
    with pytest.raises(NetworkError) as caught:
        trained_as(FilledAfterFiring, form, build())
    said = str(caught.value)
    assert "layer 'ss1' wrote into the gradient of 'ss1.weight' after firing it" in said, said


def _closed_on_the_layer_s_blame(then: str) -> BaseException:
    """What LocalSync's with-block raises where ``ss1``'s share added after firing is blamed on
    its layer and the loop, handling that, does ``then``: nothing ("raise"), a clip of its own
    ("clip"), or raises another error from it ("wrap")."""
    net = build("early")
    x, t = next(batches())
    feeds = {"x": Arg(x, needs_grad=False), "target": Arg(t, needs_grad=False)}
    net.forward(feeds)
    net.backward(lambda p: None, loss="loss")  # records the order: the next pass is guarded
    net.zero_grad()
    with pytest.raises(BaseException) as caught:
        with LocalSync(create_optimizer("sgd", lr=0.1)) as sync:
            sync.setup(net.parameters())
            sync.start_step(len(x))
            net.forward(feeds)
            try:
                net.backward(sync, loss="loss", loss_scale=len(x))
            except NetworkError as blamed:
                if then == "wrap":
                    raise RuntimeError("the loop gave up") from blamed
                if then == "clip":
                    weight = net["ss1"].weight
                    weight.grad *= 0.5
                raise
    return caught.value


@pytest.mark.parametrize(
    ("then", "kind", "said"),
    [
        ("raise", NetworkError, "layer 'ss1' wrote into the gradient of 'ss1.weight'"),
        ("wrap", RuntimeError, "the loop gave up"),
        ("clip", SyncError, "the gradient of 'ss1.weight' was written after it fired and before"),
    ],
)
def test_a_close_keeps_the_layer_s_blame_and_still_names_a_write_of_the_loop_s_own(
    then, kind, said
):
    """The close replaced the layer's blame, and another error raised from it, with its own
    words of a write between backward and finish_step; keeping them, it let a clip in the
    ``except`` (the loop's own write into a held gradient) through as numpy's bare
    "output array is read-only"."""
    error = _closed_on_the_layer_s_blame(then)
    assert type(error) is kind and said in str(error), repr(error)
