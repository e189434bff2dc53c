"""A strategy of several ranks that leaves a collective to ``SyncStrategy``'s one-process version
is refused, where it trained on, wrong, with exit 0: ranks apart after a resume, one rank's loss
logged as the epoch's, a rank of another learning rate let through the job check."""

from __future__ import annotations

import functools
import time
from abc import ABCMeta

import numpy as np
import pytest

from distconv.data import split, synthetic
from distconv.init import set_seed
from distconv.models import lenet
from distconv.optim import create_optimizer
from distconv.sync.base import SyncStrategy
from distconv.sync.local import LocalSync
from distconv.sync.one_process import COLLECTIVES, left_to_base
from distconv.trainer import Trainer
from tests.sync.bare_strategy import BareSync
from tests.sync.threaded_sync import ThreadedSync, run_ranks


def _net():
    set_seed(0)
    return lenet((1, 8, 8), num_classes=4, channels=(2, 4), hidden=8)


def _train_set():
    return split(synthetic(n=64, num_classes=4, noise=0.3, seed=3), 0.25, seed=3)[0]


def _leaving(*names: str) -> type[ThreadedSync]:
    """ThreadedSync with ``names`` taken back from SyncStrategy: a transport that forgot them."""
    return type("Forgets", (ThreadedSync,), {n: getattr(SyncStrategy, n) for n in names})


def _fit_ranks(cls: type[ThreadedSync]) -> list:
    """Two ranks of ``cls`` fitting one epoch, as threads; each rank's result or error, whose
    ``trained`` says whether its model had moved by then (a step ran)."""

    def body(rank, world):
        sync, net = cls(create_optimizer("sgd", lr=0.01), world, rank), _net()
        before = [p.value.copy() for p in net.parameters()]
        try:
            return Trainer(net, sync, 8, progress=False).fit(_train_set(), epochs=1)
        except TypeError as exc:
            now = [p.value for p in net.parameters()]
            exc.trained = any(not np.array_equal(a, b) for a, b in zip(before, now))
            return exc

    return run_ranks(2, body)


@pytest.mark.parametrize("left", [("allreduce_sum",), ("barrier",), COLLECTIVES])
def test_a_transport_of_two_ranks_that_leaves_a_collective_to_the_base_is_refused_at_setup(left):
    """Before: each forgotten collective trained both ranks to the end, exit 0, wrong. Now every
    rank's setup refuses it (before the job check, so no rank waits in it), naming each one:
    before any step, not where the Trainer first calls it (a sum, a barrier: after steps)."""
    for result in _fit_ranks(_leaving(*left)):
        assert isinstance(result, TypeError), result
        assert not result.trained, "refused after a step, not at setup"
        said = str(result)
        assert said.startswith("Forgets is rank ") and " of 2 but leaves " in said
        named = {1: left[0], 2: " and ".join(left)}.get(
            len(left), "broadcast_parameters, allreduce_sum, barrier and all_equal"
        )
        assert f"leaves {named} to SyncStrategy" in said
        assert "override" in said and "'The sync contract'" in said


def test_the_same_transport_with_every_collective_its_own_trains_as_before():
    """The control: ThreadedSync overrides all four; its two ranks end equal, and trained."""
    histories = _fit_ranks(ThreadedSync)
    assert all(isinstance(h, list) and len(h) == 1 for h in histories), histories
    assert histories[0][0]["train_loss"] == histories[1][0]["train_loss"]
    assert not left_to_base(ThreadedSync) and np.isfinite(histories[0][0]["train_loss"])


def _timed(method):
    """A timing wrapper, as a strategy's own ``__init_subclass__`` or metaclass may put around
    each collective (``functools.wraps`` keeps what it wraps, as ``__wrapped__``)."""

    @functools.wraps(method)
    def timed(self, *args, **kwargs):
        began = time.perf_counter()
        try:
            return method(self, *args, **kwargs)
        finally:
            self.waited = getattr(self, "waited", 0.0) + time.perf_counter() - began

    return timed


class _TimesItsCollectives(ThreadedSync):
    """Times each collective of every subclass, from an ``__init_subclass__`` of its own."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in COLLECTIVES:
            setattr(cls, name, _timed(getattr(cls, name)))


class _TimingMeta(ABCMeta):
    """Times each collective of every class it makes: a metaclass of a strategy's own."""

    def __new__(mcls, name, bases, namespace, **kwargs):
        cls = super().__new__(mcls, name, bases, namespace, **kwargs)
        for collective in COLLECTIVES:
            setattr(cls, collective, _timed(getattr(cls, collective)))
        return cls


def _timed_class(how: str, *names: str) -> type[ThreadedSync]:
    """A ThreadedSync whose collectives are timed by ``how``, with ``names`` taken back."""
    taken = {n: getattr(SyncStrategy, n) for n in names}
    if how == "metaclass":
        return _TimingMeta("Forgets", (ThreadedSync,), taken)
    return type("Forgets", (_TimesItsCollectives,), taken)


@pytest.mark.parametrize("how", ["__init_subclass__", "metaclass"])
def test_a_collective_left_to_the_base_is_refused_under_a_wrapper_of_the_class_own(how):
    """A class that wraps its collectives (timing them, say) wraps the base's sum too, where it
    left that to the base: the wrapper was not SyncStrategy's attribute, so the sum passed as
    the transport's own, and each rank summed its own values alone. The base's function is
    found under ``functools.wraps``'s ``__wrapped__``; the class that overrides all four, timed
    alike, trains as before."""
    for result in _fit_ranks(_timed_class(how, "allreduce_sum")):
        assert isinstance(result, TypeError), result
        assert not result.trained, "refused after a step, not at setup"
        assert str(result).startswith("Forgets is rank ")
        assert " but leaves allreduce_sum to SyncStrategy" in str(result)
    histories = _fit_ranks(_timed_class(how))
    assert all(isinstance(h, list) and len(h) == 1 for h in histories), histories
    assert histories[0][0]["train_loss"] == histories[1][0]["train_loss"]


def test_the_base_function_itself_assigned_is_left_to_the_base():
    """``allreduce_sum = SyncStrategy.allreduce_sum.__wrapped__`` (the function under the
    closed-sync guard) is the one-process sum, guarded anew: not the transport's own."""
    raw = type("Raw", (ThreadedSync,), {"allreduce_sum": SyncStrategy.allreduce_sum.__wrapped__})
    assert left_to_base(raw) == ["allreduce_sum"]


class _OwnSetup(BareSync):
    """Rank 0 of 2 whose own setup skips the base's (as the parameter server's does), so only
    the defaults' own check stands between it and a one-process sum."""

    def __init__(self, optimizer):
        super().__init__(optimizer, rank=0, world_size=2)

    def setup(self, params, config=None, state=None):
        self.params = list(params)


@pytest.mark.parametrize(
    "name,call",
    [
        ("allreduce_sum", lambda s: s.allreduce_sum([1.0, 2.0])),
        ("barrier", lambda s: s.barrier()),
        ("broadcast_parameters", lambda s: s.broadcast_parameters()),
        ("all_equal", lambda s: s.all_equal({"lr": 0.1})),
    ],
    ids=["allreduce_sum", "barrier", "broadcast_parameters", "all_equal"],
)
def test_each_default_refuses_itself_where_the_base_setup_never_ran(name, call):
    """Each default names itself alone: the one called, not the others the class left."""
    sync = _OwnSetup(create_optimizer("sgd", lr=0.1))
    sync.setup([])
    with pytest.raises(TypeError, match=rf"^_OwnSetup is rank 0 of 2 but leaves {name} to "):
        call(sync)


def test_an_override_that_calls_the_base_version_is_its_own_and_passes():
    """A transport's barrier that meets its peers, then calls super()'s for good measure, is
    not refused: the class overrides it; only the sum of a lone rank is the base's."""
    met = []

    class Chained(_OwnSetup):
        def barrier(self):
            met.append("peers")
            super().barrier()

        def allreduce_sum(self, values):
            return [2 * v for v in super().allreduce_sum(values)]  # stands in for the peers'

    sync = Chained(create_optimizer("sgd", lr=0.1))
    sync.barrier()
    assert met == ["peers"]
    assert sync.allreduce_sum([1.5]) == [3.0]
    assert left_to_base(Chained) == ["broadcast_parameters", "all_equal"]


def test_a_lone_process_keeps_the_one_process_versions():
    """World size 1 (LocalSync, the defaults' own case): nothing refused, the sum its own."""
    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    assert left_to_base(LocalSync) == list(COLLECTIVES)
    sync.setup([])
    sync.barrier()
    sync.broadcast_parameters()
    sync.all_equal({"lr": 0.1})
    assert sync.allreduce_sum([1, 2.5]) == [1.0, 2.5]


def test_the_shipped_transports_leave_none_to_the_base():
    """The parameter server's broadcast is its own no-op (its shards hold the parameters), so
    its rank of several is not refused; MPI overrides all four."""
    from distconv.sync.mpi.sync import MPISync
    from distconv.sync.ps.client import PServerSync

    assert left_to_base(PServerSync) == [] and left_to_base(MPISync) == []


def test_a_trainer_refuses_such_a_strategy_whose_own_setup_skips_the_base_when_made():
    """A strategy whose own setup skips the base's (as the parameter server's does) met the
    refusal only at its first call of the collective left to the base: a barrier after steps
    and a checkpoint, a broadcast never. The Trainer now refuses it where it is given one,
    before any data is read."""
    with pytest.raises(TypeError, match=r"^_OwnSetup is rank 0 of 2 but leaves broadcast_param"):
        Trainer(_net(), _OwnSetup(create_optimizer("sgd", lr=0.1)), 8, progress=False)
