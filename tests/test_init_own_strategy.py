"""``dist.init(optimizer, sync=factory)``: a strategy of one's own, made by a callable from the
optimizer init builds, gets init's runtime checks, logging and kernel settings. It had to be
made beside a LocalSync that ``init(sync="local")`` built and closed unused."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from distconv.distributed import init
from distconv.optim import Optimizer, create_optimizer
from distconv.runtime import RuntimeConfigError
from distconv.sync.base import SyncStrategy
from distconv.sync.local import LocalSync
from tests.mpi.common import small_lenet, train, weights

#: what would give this process a rank of several, or servers, were it set in the test's shell
RUNTIME_VARIABLES = (
    "RANK", "WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "DISTCONV_PSERVERS",
)  # fmt: skip


@pytest.fixture(autouse=True)
def _alone(monkeypatch):
    """One process with nothing in its environment that says otherwise."""
    for name in RUNTIME_VARIABLES:
        monkeypatch.delenv(name, raising=False)


class CountingSync(LocalSync):
    """LocalSync that counts the gradients it is handed: a strategy of one's own, for real."""

    def __init__(self, optimizer: Optimizer) -> None:
        super().__init__(optimizer)
        self.gradients = 0

    def on_gradient(self, param) -> None:
        self.gradients += 1
        super().on_gradient(param)


def test_a_strategy_made_by_a_factory_is_what_init_returns_and_it_trains():
    """The factory gets the optimizer init builds from its name and hyperparameters; what it
    makes comes back, and trains as LocalSync does with that optimizer, to the last bit."""
    made = []

    def factory(optimizer: Optimizer) -> CountingSync:
        made.append(CountingSync(optimizer))
        return made[-1]

    sync = init("momentum", lr=0.05, sync=factory, log_format=None)
    assert made == [sync] and type(sync) is CountingSync
    assert sync.optimizer_config() == create_optimizer("momentum", lr=0.05).config()
    ends = []
    for strategy in (sync, LocalSync(create_optimizer("momentum", lr=0.05))):
        net = small_lenet(seed=3)
        start = weights(net)
        strategy.setup(net.parameters())
        train(net, strategy)
        ends.append(weights(net))
        strategy.close()
    assert sync.gradients == 4 * len(start)  # four steps, every parameter in each
    assert any((ends[0][k] != start[k]).any() for k in start)  # it trained
    assert all((ends[0][k] == ends[1][k]).all() for k in start)


def test_a_strategy_class_is_a_factory_and_a_built_optimizer_is_handed_over():
    optimizer = create_optimizer("adam", lr=0.5)
    sync = init(optimizer, sync=CountingSync, log_format=None)
    assert type(sync) is CountingSync and sync.optimizer is optimizer
    assert (sync.rank, sync.world_size, sync.is_chief) == (0, 1, True)


def _returns_none(optimizer: Optimizer) -> None:
    """A factory whose ``return`` was forgotten."""
    CountingSync(optimizer)


@pytest.mark.parametrize(
    "factory,said",
    [
        (lambda opt: opt, r"init: sync=.*<lambda> returned SGD SGD\(.*\), not a SyncStrategy"),
        (_returns_none, r"init: sync=_returns_none returned NoneType None, not a SyncStrategy"),
    ],
    ids=["the optimizer", "none"],
)
def test_a_factory_that_makes_no_strategy_is_refused_naming_it_and_what_it_made(factory, said):
    with pytest.raises(TypeError, match=said):
        init("sgd", sync=factory, log_format=None)


@dataclass
class UnmadeSync(LocalSync):
    """A @dataclass strategy whose base ``__init__`` never runs: it has no rank to compare."""

    optimizer: Optimizer


def test_a_strategy_whose_base_init_never_ran_is_refused_by_init_naming_its_class():
    """Its rank is not there to compare: the base's own refusal, from init, not an
    AttributeError (its close refuses alike: there is nothing of the base to close)."""
    with pytest.raises(TypeError, match=r"^UnmadeSync was made without calling super"):
        init("sgd", sync=UnmadeSync, log_format=None)


@pytest.mark.parametrize(
    "flags,environment,said",
    [
        (
            {"rank": 1, "world_size": 2}, {},
            r"^Recorded says rank 0 of 1, but the environment \(flags\) says rank 1 of 2; it "
            r"trains alone:",
        ),
        (
            {"rank": 0, "world_size": 1}, {"PMI_RANK": "0", "PMI_SIZE": "2"},
            r"^an MPI launcher started this process as one of 2 ranks, but Recorded says rank 0 "
            r"of 1; it trains alone:",
        ),
    ],
    ids=["flags", "launcher"],
)  # fmt: skip
def test_a_strategy_whose_rank_or_size_disagrees_with_the_runtime_is_refused_and_closed(
    monkeypatch, flags, environment, said
):
    """A LocalSync subclass on a rank of two (``mpiexec -n 2``): it trained alone on each
    rank, every rank writing as the chief. Refused as init refuses its transports, closed."""
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    made = []

    class Recorded(CountingSync):
        def __init__(self, optimizer: Optimizer) -> None:
            super().__init__(optimizer)
            made.append(self)

    with pytest.raises(RuntimeConfigError, match=said):
        init("sgd", sync=Recorded, flags=flags, log_format=None)
    assert len(made) == 1 and made[0].closed


class TwoRanks(SyncStrategy):
    """Rank 1 of 2, whatever the runtime says (it never trains here)."""

    def __init__(self, optimizer: Optimizer) -> None:
        super().__init__(optimizer, rank=1, world_size=2)

    def on_gradient(self, param) -> None:
        raise AssertionError("not trained")

    def finish_step(self) -> None:
        raise AssertionError("not trained")

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state) -> None:
        raise AssertionError("not trained")


def test_a_strategy_of_two_ranks_is_taken_where_the_runtime_agrees_and_refused_elsewhere():
    """The check compares the numbers: rank 1 of 2 under flags that say so is kept; under
    flags that say rank 0 of 2 it is refused, both ranks named (no advice to train alone)."""
    sync = init("sgd", sync=TwoRanks, flags={"rank": 1, "world_size": 2}, log_format=None)
    assert (type(sync), sync.rank, sync.world_size, sync.closed) == (TwoRanks, 1, 2, False)
    said = r"^TwoRanks says rank 1 of 2, but the environment \(flags\) says rank 0 of 2; make"
    with pytest.raises(RuntimeConfigError, match=said):
        init("sgd", sync=TwoRanks, flags={"rank": 0, "world_size": 2}, log_format=None)


@pytest.mark.parametrize(
    "arguments,said",
    [
        (
            {"sync": CountingSync, "sync_options": {"timeout": 5}},
            r"init: sync_options \['timeout'\] are for a transport given by name; "
            r"sync=CountingSync makes a strategy with its own settings",
        ),
        (
            {"sync": LocalSync(create_optimizer("sgd"))},
            r"init: sync is a LocalSync made already: pass what makes one from the optimizer",
        ),
        ({"sync": 3}, r"init: sync must be a transport name \('local', 'pserver', 'mpi'\)"),
    ],
    ids=["sync_options", "a strategy", "a number"],
)
def test_a_sync_init_cannot_use_is_refused_before_anything_is_read(arguments, said):
    """Before the runtime is read (the flags here are malformed) and before the factory runs:
    settings beside a factory would be dropped, and a strategy made already is callable (it
    takes gradients) but would be handed the optimizer as one."""
    with pytest.raises(TypeError, match=said):
        init("sgd", flags={"rank": "x"}, log_format=None, **arguments)
