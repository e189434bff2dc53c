"""The sync contract as a transport of one's own, or a script, meets it (``docs/architecture.md``,
"The sync contract"): what ``SyncStrategy`` itself refuses, and ``LocalSync``'s step order."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.sync import create_sync
from distconv.sync.local import LocalSync


@pytest.mark.parametrize("optimizer", ["adam", None, {"name": "sgd", "lr": 0.1}])
def test_a_sync_refuses_an_optimizer_that_is_not_one(optimizer):
    """LocalSync('adam') was taken, and failed at the first setup with "'str' object has no
    attribute 'config'"."""
    with pytest.raises(TypeError, match=r"LocalSync needs an Optimizer, got .*create_optimizer"):
        LocalSync(optimizer)
    with pytest.raises(TypeError, match=r"LocalSync needs an Optimizer"):
        create_sync("local", optimizer=optimizer)


def _model(seed: int = 0):
    """A two-layer network and a batch for it."""
    import numpy as np

    from distconv.layers import FullyConnected, MSELoss
    from distconv.network import Network

    rng = np.random.default_rng(seed)
    net = Network()
    net.add("fc1", FullyConnected(3, 4), "x")
    net.add("fc2", FullyConnected(4, 1), "fc1")
    net.add("loss", MSELoss(), ["fc2", "target"])
    feeds = {"x": rng.standard_normal((8, 3)), "target": rng.standard_normal((8, 1))}
    return net, feeds


def _local(net):
    from distconv.optim import create_optimizer

    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    sync.setup(net.parameters())
    return sync


def _values(net):
    return [p.value.copy() for p in net.parameters()]


def test_local_sync_refuses_a_gradient_outside_a_step_and_changes_nothing():
    """Without start_step the optimizer took the gradient's sum over 8 examples as it was,
    an 8 times larger step, without a word; MPISync refuses it."""
    import numpy as np

    from distconv.sync.base import SyncError

    net, feeds = _model()
    sync = _local(net)
    before = _values(net)
    net.forward(feeds)
    with pytest.raises(SyncError, match=r"gradient of 'fc2\.\w+' arrived outside a step"):
        net.backward(sync, loss="loss", loss_scale=8)
    assert all(np.array_equal(a, p.value) for a, p in zip(before, net.parameters()))
    with pytest.raises(SyncError, match=r"finish_step\(\) without start_step\(\)"):
        sync.finish_step()


def test_local_sync_refuses_a_parameter_fired_twice_in_a_step():
    """Two backward passes handing their gradients to the sync in one step updated each
    parameter twice (accumulation done with the sync instead of a no-op first)."""
    from distconv.sync.base import SyncError

    net, feeds = _model()
    sync = _local(net)
    sync.start_step(8)
    net.forward(feeds)
    net.backward(sync, loss="loss", loss_scale=8)
    net.forward(feeds)
    with pytest.raises(SyncError, match=r"parameter 'fc2\.\w+' fired twice in one step"):
        net.backward(sync, loss="loss", loss_scale=8)
    sync.abandon_step()
    net.zero_grad()
    sync.start_step(8)  # a new step takes them again
    net.forward(feeds)
    net.backward(sync, loss="loss", loss_scale=8)
    sync.finish_step()


def test_local_sync_refuses_a_parameter_not_given_to_setup():
    """A second model's parameters of the same names were updated with the first model's
    optimizer state (its momentum); a parameter with no state at all was a bare KeyError."""
    from distconv.sync.base import SyncError

    net, feeds = _model()
    sync = _local(net)
    other, _ = _model(seed=1)
    sync.start_step(8)
    other.forward(feeds)
    with pytest.raises(SyncError, match=r"not given to setup \(a parameter of that name was"):
        other.backward(sync, loss="loss", loss_scale=8)


@pytest.mark.parametrize("transport", ["local", "mpi"])
def test_setup_refuses_two_parameters_of_one_name_and_takes_one_listed_twice(
    transport, monkeypatch
):
    """Two Parameter("w", ...) given to setup shared one optimizer state (both moved by one
    Adam's moments) under LocalSync, and MPISync called the second 'fired twice'."""
    import sys

    import numpy as np

    from distconv.optim import create_optimizer
    from distconv.parameter import Parameter

    monkeypatch.setitem(sys.modules, "mpi4py", None)  # MPI's single-rank stand-in
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    sync = create_sync(transport, optimizer=create_optimizer("adam", lr=0.1))
    a, b = Parameter("w", np.ones(3)), Parameter("w", np.ones(4))
    try:
        with pytest.raises(ValueError, match=r"two parameters are named 'w' \(\(3,\) and \(4,\)\)"):
            sync.setup([a, b])
        sync.setup([a, a])
        assert sync.params == [a]
    finally:
        sync.close()


@pytest.mark.parametrize("examples", [2.5, -8, "8", True])
def test_start_step_refuses_an_example_count_that_is_not_one(examples):
    """start_step(2.5) averaged over 2 examples and start_step(-8) applied the gradients'
    sum (mean_scale of a negative count is 1), both without a word."""
    import numpy as np

    net, _ = _model()
    sync = _local(net)
    with pytest.raises(ValueError, match=r"start_step: examples must be a count"):
        sync.start_step(examples)
    sync.start_step(np.int64(8))  # a numpy count is one
    sync.finish_step()


@pytest.mark.parametrize(
    "state,words",
    [
        ({"ghost": {"m": [0.0]}}, r"state for 'ghost', which is no parameter of its setup"),
        ({"fc2.weight": {"moment": [0.0]}}, r"'fc2.weight' has no state 'moment' \(it has"),
        ({"fc2.weight": {"m": [0.0]}}, r"fc2.weight/m: shape \(1,\) given, \(1, 4\) here"),
    ],
)
def test_load_state_dict_refuses_state_that_does_not_fit_and_copies_nothing(state, words):
    """A name the sync has no parameter of was a bare KeyError, and a state of shape (1,) was
    broadcast into a (1, 4) moment without a word."""
    import numpy as np

    from distconv.optim import create_optimizer

    net, _ = _model()
    sync = LocalSync(create_optimizer("adam", lr=0.1))
    sync.setup(net.parameters())
    sync.state["fc2.weight"]["m"][...] = 7.0
    with pytest.raises(ValueError, match=words):
        sync.setup(net.parameters(), state={**state, "fc1.bias": {"m": np.ones(4)}})
    assert (sync.state["fc2.weight"]["m"] == 7.0).all() and (sync.state["fc1.bias"]["m"] == 0).all()
    sync.load_state_dict({"fc1.bias": {"m": np.ones(4), "step_per_row": np.ones(4)}})
    assert (sync.state["fc1.bias"]["m"] == 1).all()


@pytest.mark.parametrize("rank,world", [(1.5, 2), ("1", 2), (True, 2), (0, 2.5), (0, None)])
def test_a_sync_refuses_a_rank_or_world_size_that_is_not_an_integer(rank, world):
    """A transport of one's own (or PServerSync) built with rank 1.5 of 2 was rank 1.5, and
    rank "1" failed with "'<=' not supported between instances of 'int' and 'str'"."""
    from distconv.optim import create_optimizer
    from tests.sync.bare_strategy import BareSync as Mine

    with pytest.raises(ValueError, match=r"need integers 0 <= rank < world_size, got rank"):
        Mine(create_optimizer("sgd"), rank, world)
    assert Mine(create_optimizer("sgd"), 1, 2).rank == 1


@pytest.mark.parametrize("factor", [float("nan"), float("inf"), -0.5, "0.5", None])
def test_set_lr_scale_refuses_a_factor_that_is_not_a_finite_rate(factor):
    """set_lr_scale(nan) made every weight NaN at the next step, and -0.5 trained uphill."""
    import numpy as np

    net, _ = _model()
    sync = _local(net)
    with pytest.raises(ValueError, match=r"set_lr_scale: factor must be a finite number >= 0"):
        sync.set_lr_scale(factor)
    assert sync.optimizer.lr == 0.1
    sync.set_lr_scale(np.float32(0.5))
    assert sync.optimizer.lr == pytest.approx(0.05)


@pytest.mark.parametrize("transport", ["local", "mpi"])
def test_a_gradient_out_of_order_is_refused_in_the_same_words_on_every_transport(
    transport, monkeypatch
):
    """LocalSync and MPISync share one refusal (base.step_refusal): MPISync said only
    '(no start_step)' where LocalSync said what to call, in words of its own."""
    import sys

    import numpy as np

    from distconv.optim import create_optimizer
    from distconv.parameter import Parameter
    from distconv.sync.base import SyncError

    monkeypatch.setitem(sys.modules, "mpi4py", None)  # MPI's single-rank stand-in
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    sync = create_sync(transport, optimizer=create_optimizer("sgd", lr=0.1))
    a, b = Parameter("a", np.ones(3)), Parameter("b", np.ones(2))
    outside = r"call start_step\(examples\) before backward, finish_step\(\) after it$"
    try:
        sync.setup([a])
        with pytest.raises(SyncError, match=rf"^gradient of 'a' arrived outside a step: {outside}"):
            sync.on_gradient(a)
        sync.start_step(1)
        sync.on_gradient(a)
        with pytest.raises(SyncError, match=r"^parameter 'a' fired twice in (one step|step 0)$"):
            sync.on_gradient(a)
        with pytest.raises(SyncError, match=r"^gradient of 'b', which was not given to setup$"):
            sync.on_gradient(b)
        sync.finish_step()
    finally:
        sync.close()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("transport", ["local", "mpi"])
def test_a_sync_closed_mid_step_takes_no_gradient_and_changes_nothing(transport):
    """close() between start_step and finish_step: LocalSync still applied every gradient of
    the backward that followed (a closed sync training on), and the one-rank MPISync took them
    into its buckets without a word. Both now refuse the close itself (the step left open, in
    one set of words), yet close all the same: the backward after it is refused, naming
    close(), and nothing changes."""
    import numpy as np

    from distconv.optim import create_optimizer
    from distconv.sync.base import SyncError
    from distconv.sync.mpi import MPISync, SingleRankComm

    net, feeds = _model()
    sync = (
        _local(net)
        if transport == "local"
        else MPISync(create_optimizer("sgd", lr=0.1), comm=SingleRankComm())
    )
    if transport == "mpi":
        sync.setup(net.parameters())
    before = _values(net)
    sync.start_step(8)
    net.forward(feeds)
    with pytest.raises(SyncError, match=r"closed in the middle of step 0 .*finish_step\(\)"):
        sync.close()
    assert sync.closed
    with pytest.raises(SyncError, match=r"gradient of 'fc2\.\w+' arrived after close\(\)"):
        net.backward(sync, loss="loss", loss_scale=8)
    assert all(np.array_equal(a, p.value) for a, p in zip(before, net.parameters()))


def test_local_sync_refuses_a_step_started_inside_another():
    """start_step twice without finish_step (accumulation written as a step per pass) took
    each pass's gradients as a step of its own: every parameter updated twice, without a
    word, where MPISync refuses the second start_step."""
    from distconv.sync.base import SyncError

    net, feeds = _model()
    sync = _local(net)
    sync.start_step(8)
    net.forward(feeds)
    net.backward(sync, loss="loss", loss_scale=8)
    after_one = _values(net)
    with pytest.raises(SyncError, match=r"LocalSync\.start_step\(\) while a step is unfinished"):
        sync.start_step(8)
    sync.finish_step()
    sync.start_step(8)  # after finish_step, as after abandon_step: a new step
    sync.abandon_step()
    sync.start_step(8)
    sync.setup(net.parameters())  # a fit after a step left open (its abandon_step overridden)
    sync.start_step(8)
    sync.finish_step()
    assert all((a == p.value).all() for a, p in zip(after_one, net.parameters()))


def _adam_or_momentum_sync(transport: str, name: str, monkeypatch):
    """A LocalSync or a one-rank MPISync (the stand-in of mpi4py) of ``name``, set up on one
    4 x 4 parameter ``w``."""
    import sys

    import numpy as np

    from distconv.optim import create_optimizer
    from distconv.parameter import Parameter

    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", None)
    sync = create_sync(transport, optimizer=create_optimizer(name, lr=0.01))
    sync.setup([Parameter("w", np.zeros((4, 4)))])
    return sync


@pytest.mark.parametrize("transport", ["local", "mpi"])
@pytest.mark.parametrize("bad", [-1, float("nan"), 2.5, 2.0**63, np.uint64(2**63)])
def test_a_step_that_is_no_count_is_refused_naming_it_and_nothing_is_loaded(
    transport, bad, monkeypatch
):
    """Adam's ``step`` went into the int64 buffer as whatever numpy cast it to: -1 as -1 (a
    bias correction of a step never taken), NaN and 2**63 as -2**63 with a RuntimeWarning at
    most, 2.5 as 2. The parameter server refused them (row_counts); these syncs now do too,
    before any key is copied. (The parameter server's own tests cover it there.)"""
    sync = _adam_or_momentum_sync(transport, "adam", monkeypatch)
    try:
        given = {"m": np.ones((4, 4)), "v": np.ones((4, 4)), "step": bad}
        with pytest.raises(ValueError, match=r"load_state_dict: w/step: holds .*not a count"):
            sync.load_state_dict({"w": given})
        state = sync.state_dict()["w"]
        assert int(state["step"]) == 0 and not state["m"].any() and not state["v"].any()
    finally:
        sync.close()


@pytest.mark.parametrize("transport", ["local", "mpi"])
@pytest.mark.parametrize("count", [7, np.int64(7), np.uint8(7), 7.0, np.float32(7.0)])
def test_a_step_of_any_whole_number_form_is_loaded(transport, count, monkeypatch):
    """A count held as a float (PyTorch keeps Adam's ``step`` as a float tensor; a checkpoint
    converted from one) is still a count: only what is no whole number >= 0 is refused."""
    sync = _adam_or_momentum_sync(transport, "adam", monkeypatch)
    try:
        sync.load_state_dict({"w": {"step": count, "step_per_row": np.full(4, 7)}})
        assert sync.state_dict()["w"]["step"] == 7
        assert sync.state_dict()["w"]["step"].dtype == np.int64
    finally:
        sync.close()


@pytest.mark.parametrize("transport", ["local", "mpi"])
@pytest.mark.parametrize("key", ["step_per_row", "step_runs_per_row", "velocity_per_row"])
def test_per_row_counts_of_a_count_the_optimizer_lacks_are_refused(transport, key, monkeypatch):
    """Per-row counts are skipped by these syncs, which keep one count per parameter; those of
    a count the optimizer does not keep (``step_per_row`` to Momentum, which has no ``step``;
    no writer makes a ``K_per_row`` but of a scalar count ``K``) were skipped silently too:
    state of another optimizer's run taken as this one's."""
    sync = _adam_or_momentum_sync(transport, "momentum", monkeypatch)
    try:
        velocity = np.ones((4, 4))
        with pytest.raises(ValueError, match=rf"'w' has no state '{key}' \(.*\['velocity'\]\)"):
            sync.load_state_dict({"w": {"velocity": velocity, key: np.zeros(4, np.int64)}})
        assert not sync.state_dict()["w"]["velocity"].any()
    finally:
        sync.close()
