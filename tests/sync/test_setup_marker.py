"""Only a setup that completed lets a step start, on every transport in one process (LocalSync,
a one-rank MPISync, a PServerSync on a real shard).

A setup that raised let ``start_step`` through on LocalSync and PServerSync, whose first
gradient was then refused as "not given to setup", as if the parameter list were wrong. A
list of arrays (not Parameters) failed with a bare ``AttributeError: 'numpy.ndarray' object
has no attribute 'static'``. MPISync's setup that completes, then raises the Ctrl-C it held
back, still lets the script step on (two ranks: ``tests/mpi/test_setup_interrupt.py``).
"""

from __future__ import annotations

import signal

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

#: the way on a refusal of what setup was given names
FIX = "pass network.parameters() (a sync trains Parameters, not their arrays)"
#: the refusal of a step after a setup that raised (the words, not imported from the code)
AFTER_RAISED = r"start_step called after a setup that raised: a step needs a setup that completes"


def _two_of_one_name() -> list[Parameter]:
    """Two different parameters named alike: every transport's setup refuses them."""
    return [Parameter("w", np.zeros(3)), Parameter("w", np.zeros(4))]


def _one_step(net, sync) -> None:
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((8, 1, 8, 8)), rng.integers(0, 4, 8)
    sync.start_step(8)
    net.forward({"image": Arg(x, needs_grad=False), "label": Arg(ids=y, needs_grad=False)})
    net.backward(sync, loss="loss", loss_scale=8)
    sync.finish_step()


@pytest.mark.parametrize("make_sync", TRANSPORTS, indirect=True)
def test_a_step_after_a_setup_that_raised_is_refused_at_once(make_sync):
    sync = make_sync()
    with sync:
        with pytest.raises(ValueError, match="two parameters are named 'w'"):
            sync.setup(_two_of_one_name())
        with pytest.raises(SyncError, match=r"start_step .*setup"):
            sync.start_step(1)


@pytest.mark.parametrize("make_sync", ["local", "pserver"], indirect=True)
def test_the_refusal_says_the_setup_raised(make_sync):
    """MPISync names the failed setup in its own words (its ``_failed_setup``)."""
    sync = make_sync()
    with sync:
        with pytest.raises(ValueError):
            sync.setup(_two_of_one_name())
        with pytest.raises(SyncError, match=AFTER_RAISED):
            sync.start_step(1)


@pytest.mark.parametrize("make_sync", TRANSPORTS, indirect=True)
@pytest.mark.parametrize("given", [[np.zeros(3)], np.zeros(3)], ids=["list", "array"])
def test_arrays_given_to_setup_are_refused_naming_the_fix(make_sync, given):
    sync = make_sync()
    with sync:
        with pytest.raises(TypeError, match=r"numpy\.ndarray|ndarray") as refused:
            sync.setup(given)
        said = str(refused.value)
        assert "not a Parameter" in said or "list of Parameters" in said, said
        assert said.endswith(FIX), said
        if isinstance(given, list):
            assert said.startswith("setup: item 0 is a numpy.ndarray"), said
        with pytest.raises(SyncError, match=r"start_step .*setup"):
            sync.start_step(1)


@pytest.mark.parametrize("make_sync", TRANSPORTS, indirect=True)
def test_a_setup_that_completes_after_one_that_raised_lets_steps_start(make_sync):
    net, sync = small_net(), make_sync()
    with sync:
        with pytest.raises(TypeError):
            sync.setup([np.zeros(3)])
        sync.setup(net.parameters())
        before = [p.value.copy() for p in net.parameters()]
        _one_step(net, sync)
    assert all((a != p.value).any() for a, p in zip(before, net.parameters()))


class _InterruptingHook:
    """A grad_hook whose ``describe()`` (called inside MPISync's setup, which holds a Ctrl-C
    to its end) gets a real SIGINT."""

    def describe(self) -> dict[str, str]:
        signal.raise_signal(signal.SIGINT)
        return {"kind": "interrupting"}

    def __call__(self, params: list[Parameter], examples: int) -> None:
        """Leaves every gradient as it is."""


def test_a_one_rank_mpisync_set_up_then_interrupted_steps_on():
    """MPISync's setup completes, then raises the Ctrl-C it held: set up all the same, as every
    rank is, so the script's step after it is taken (not refused as "before setup")."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed")
    from distconv.optim import create_optimizer
    from distconv.sync.mpi import MPISync, SingleRankComm

    net = small_net()
    hook = _InterruptingHook()
    with MPISync(create_optimizer("sgd", lr=0.05), comm=SingleRankComm(), grad_hook=hook) as sync:
        with pytest.raises(KeyboardInterrupt):
            sync.setup(net.parameters())
        before = [p.value.copy() for p in net.parameters()]
        _one_step(net, sync)
    assert all((a != p.value).any() for a, p in zip(before, net.parameters()))


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ([None], "setup: item 0 is None, not a Parameter"),
        ({"w": Parameter("w", np.zeros(3))}, "setup takes a list of Parameters, got dict"),
        ("w", "setup takes a list of Parameters, got str"),
    ],
    ids=["none", "mapping", "string"],
)
def test_what_is_no_list_of_parameters_is_named_as_it_is(given, said):
    """None was "a NoneType"; a mapping of Parameters by name, "item 0 is a str" (its key)."""
    from distconv.optim import create_optimizer
    from distconv.sync.local import LocalSync

    with LocalSync(create_optimizer("sgd", lr=0.1)) as sync:
        with pytest.raises(TypeError) as refused:
            sync.setup(given)
    assert str(refused.value) == f"{said}: {FIX}"
