"""``network.backward(sync)`` without ``loss_scale``: a mean loss seeded with 1 hands the sync
a mean where it takes a sum, every transport divides it by the step's examples again, and the
model trains at 1/batch of its learning rate. It is warned of once per network, and only where
it is that mistake: not for the count passed, a pass of one row, a step told 1 example, a plain
callback, or a loss of one's own that sums its rows."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from distconv import Arg, Network
from distconv.init import set_seed
from distconv.layers import FullyConnected, MSELoss, SoftmaxCrossEntropy
from distconv.layers.base import Layer
from distconv.optim import create_optimizer
from distconv.sync.base import SyncStrategy
from distconv.sync.local import LocalSync
from distconv.sync.mpi import MPISync, SingleRankComm
from distconv.trainer import Trainer
from tests.sync.ps.ps_helpers import Shards, insecure_worker

pytestmark = pytest.mark.timeout(60)

ROWS = 8
RNG = np.random.default_rng(1)
X, Y = RNG.standard_normal((ROWS, 6)), RNG.integers(0, 3, ROWS)


class SummedSquares(Layer):
    """A loss of one's own: the *sum* over its rows of ``(pred - target)^2``, whose gradient
    is a sum already (a loss_scale of 1 is right for it)."""

    num_inputs = 2

    def _forward(self, pred: Arg, target: Arg) -> Any:
        self._diff = pred.value - target.value
        return (self._diff * self._diff).sum()

    def _backward(self, dz: Any, callback: Any) -> None:
        if self.inputs[0].needs_grad:
            self.inputs[0].grad += 2 * dz * self._diff

    def make_output(self, y: Any, inputs: tuple[Arg, ...]) -> Arg:
        return Arg(y)


class MeanSquares(SummedSquares):
    """A loss of one's own that says it averages its rows (``mean_loss = True``)."""

    mean_loss = True


class SummingCrossEntropy(SoftmaxCrossEntropy):
    """A subclass of a library mean loss that says it is not one (``mean_loss = False``)."""

    mean_loss = False


def network(loss: Layer) -> tuple[Network, dict[str, Arg]]:
    """A float64 fully connected layer into ``loss``, and the feeds of one pass of ROWS rows."""
    set_seed(0)
    net = Network()
    net.add("fc", FullyConnected(6, 3, dtype=np.float64), inputs="x")
    if isinstance(loss, SoftmaxCrossEntropy):
        net.add("loss", loss, inputs=["fc", "label"])
        return net, {"x": Arg(X, needs_grad=False), "label": Arg(ids=Y)}
    net.add("loss", loss, inputs=["fc", "target"])
    return net, {"x": Arg(X, needs_grad=False), "target": Arg(np.eye(3)[Y], needs_grad=False)}


def local() -> LocalSync:
    return LocalSync(create_optimizer("sgd", lr=0.1))


def one_rank_mpi() -> MPISync:
    return MPISync(create_optimizer("sgd", lr=0.1), comm=SingleRankComm())


def steps(
    make_sync: Callable[[], SyncStrategy],
    loss: Layer,
    count: int = 1,
    examples: int = ROWS,
    rows: int = ROWS,
    callback: Callable[[SyncStrategy], Any] = lambda sync: sync,
    **backward: Any,
) -> tuple[list[str], np.ndarray]:
    """``count`` steps of ``rows`` rows, the sync told ``examples``, ``callback(sync)`` handed
    to backward; the warnings the steps gave and the weight's total move."""
    net, feeds = network(loss)
    feeds = {name: Arg(a.value[:rows], needs_grad=False) if a.value is not None
             else Arg(ids=a.ids[:rows]) for name, a in feeds.items()}  # fmt: skip
    sync = make_sync()
    sync.setup(net.parameters())
    start = net.layers["fc"].weight.value.copy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            for _ in range(count):
                sync.start_step(examples)
                net.forward(feeds)
                net.backward(callback(sync), **backward)
                sync.finish_step()
        finally:
            sync.close()
    return [str(w.message) for w in caught], net.layers["fc"].weight.value - start


@pytest.mark.parametrize("make_sync", [local, one_rank_mpi], ids=["local", "mpi"])
def test_a_mean_loss_seeded_with_1_for_a_sync_is_warned_of_once_naming_the_count(make_sync):
    """Three steps, one warning, naming the loss, the rows and the loss_scale to pass. Before,
    the step was 1/8 of the one with loss_scale=8, without a word (even under ``-W error``)."""
    said, moved = steps(make_sync, SoftmaxCrossEntropy(), count=1)
    _, right = steps(make_sync, SoftmaxCrossEntropy(), count=1, loss_scale=ROWS)
    assert np.abs(right).max() / np.abs(moved).max() == pytest.approx(ROWS)  # the mistake
    assert len(said) == 1
    assert "SoftmaxCrossEntropy 'loss', a mean over 8 rows, with loss_scale=1" in said[0]
    assert "pass backward(sync, loss_scale=8)" in said[0]
    said, _ = steps(make_sync, MSELoss(), count=3)
    assert len(said) == 1 and "MSELoss 'loss'" in said[0]


def test_the_warning_names_the_line_that_called_backward():
    """It points at the user's ``net.backward(sync)``, not at distconv's code."""
    net, feeds = network(SoftmaxCrossEntropy())
    sync = local()
    sync.setup(net.parameters())
    sync.start_step(ROWS)
    net.forward(feeds)
    with pytest.warns(UserWarning, match="loss_scale=8") as caught:
        net.backward(sync)
    sync.finish_step()
    sync.close()
    assert caught[0].filename == __file__


def test_a_sync_worker_of_a_parameter_server_is_warned_of_too(tmp_path):
    """The check reads the step's count through the contract: a real PServerSync on a shard."""
    shards = Shards(tmp_path)
    try:
        endpoints = shards.start(1, 1)
        said, _ = steps(lambda: insecure_worker(endpoints), SoftmaxCrossEntropy())
    finally:
        shards.stop()
    assert len(said) == 1 and "backward(PServerSync)" in said[0]


@contextmanager
def no_warning() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


@pytest.mark.parametrize(
    "loss, options",
    [
        (SoftmaxCrossEntropy, {"loss_scale": ROWS}),  # the count, as the Trainer passes it
        (SoftmaxCrossEntropy, {"rows": 1, "examples": 1}),  # one row: 1 is its count
        (SoftmaxCrossEntropy, {"examples": 1}),  # told 1 a step: the ranks' means averaged
        (SummedSquares, {}),  # a loss of one's own that sums: 1 is right
        (SummingCrossEntropy, {}),  # a library loss's subclass that says it sums
    ],
    ids=["scaled", "one-row", "step-of-1", "own-sum", "says-sum"],
)
def test_no_warning_where_a_seed_of_1_is_not_the_mistake(loss, options):
    with no_warning():
        said, _ = steps(local, loss(), **options)
    assert said == []


def test_a_loss_of_ones_own_that_says_it_takes_a_mean_is_warned_of():
    said, _ = steps(local, MeanSquares())
    assert len(said) == 1 and "MeanSquares 'loss', a mean over 8 rows" in said[0]


def test_a_plain_callback_is_not_warned_of():
    """The README's ``net.backward(on_gradient)``: no sync divides anything."""
    net, feeds = network(SoftmaxCrossEntropy())
    net.forward(feeds)
    with no_warning():
        net.backward(lambda param: param.grad.fill(0))


def test_the_syncs_bound_on_gradient_is_warned_of_as_the_sync_is():
    """``backward(sync.on_gradient)``, as the Trainer hands it over: the same division by the
    step's examples. Before, it was taken for a plain callback and the mistake went unsaid."""
    said, _ = steps(local, SoftmaxCrossEntropy(), callback=lambda sync: sync.on_gradient)
    assert len(said) == 1 and said[0].startswith("backward(LocalSync.on_gradient) seeded")
    with no_warning():
        steps(local, SoftmaxCrossEntropy(), callback=lambda sync: sync.on_gradient, loss_scale=8)


class UnsayingSync(LocalSync):
    """A strategy of one's own whose ``step_examples`` raises what no sync of the library
    does: the warning must not turn the pass into that error."""

    @property
    def step_examples(self) -> int:
        raise ValueError("this strategy counts its own way")


class Counter:
    """A callback of one's own that has a ``step_examples`` of another meaning."""

    step_examples = property(lambda self: "several")

    def __call__(self, param: Any) -> None:
        param.grad.fill(0)


def test_a_step_examples_that_cannot_be_read_leaves_the_pass_alone():
    """Before, ``backward`` raised the ValueError of ``step_examples`` (or of ``int()`` of it)
    after the sync had taken every gradient: a step that trained reported as failed."""
    said, moved = steps(
        lambda: UnsayingSync(create_optimizer("sgd", lr=0.1)), SoftmaxCrossEntropy()
    )
    assert said == [] and np.abs(moved).max() > 0  # the step was taken
    net, feeds = network(SoftmaxCrossEntropy())
    net.forward(feeds)
    with no_warning():
        net.backward(Counter())


def test_the_trainer_handing_over_sync_on_gradient_is_never_warned_of():
    """The Trainer's passes reach the check now that a bound ``on_gradient`` counts as the
    sync. Each is seeded with its rows: passes of 1 row (seed 1) in steps of 2 examples, the
    first handed to a no-op callback, and a short last step whose second pass is empty."""
    net, _ = network(SoftmaxCrossEntropy())
    sync = local()
    try:
        with no_warning():
            Trainer(net, sync, batch_size=1, accumulate=2, progress=False).fit(
                {"x": X[:7], "label": Y[:7]}, epochs=2
            )
    finally:
        sync.close()


class Forwarding:
    """A callback of one's own that answers what it lacks from a table of its own: asked for
    ``__self__``, it raises KeyError."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._table: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        return self._table[name]

    def __call__(self, param: Any) -> None:
        self.seen.append(param.name)


def test_a_callback_s_own_getattr_is_not_run_to_find_its_sync():
    """The check asked every callback ``getattr(callback, "__self__", callback)``: the
    callback's own ``__getattr__`` ran after the pass, and its KeyError came out of every
    ``backward`` seeded with 1. A bound method is told by its type, as the write guard does."""
    net, feeds = network(SoftmaxCrossEntropy())
    net.forward(feeds)
    callback = Forwarding()
    with no_warning():
        net.backward(callback)
    assert sorted(callback.seen) == ["fc.bias", "fc.weight"]  # the pass ran, and fired each
