"""A sync strategy of one's own, written from ``docs/architecture.md`` ("The sync contract"),
trained by the Trainer: what its mistakes are told."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Network, Trainer
from distconv.layers import FullyConnected, MSELoss
from distconv.optim import SGD
from distconv.sync.base import SyncError, SyncStrategy
from distconv.sync.local import LocalSync


def _model() -> tuple[Network, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    net = Network()
    net.add("fc", FullyConnected(3, 1, dtype=np.float64), "x")
    net.add("loss", MSELoss(), ["fc", "target"])
    return net, {"x": rng.standard_normal((16, 3)), "target": rng.standard_normal((16, 1))}


class PlainSGD(SyncStrategy):
    """Plain SGD on the step's mean gradient, applied as each gradient arrives."""

    def __init__(self, lr: float, zero: bool = True) -> None:
        super().__init__(SGD(lr=lr))
        self.lr, self.zero = lr, zero

    def on_gradient(self, param) -> None:
        param.value -= self.lr * param.grad / self.step_examples
        if self.zero:
            param.grad[...] = 0

    def finish_step(self) -> None:
        pass

    def state_dict(self):
        return {}

    def load_state_dict(self, state) -> None:
        pass


def test_a_sync_that_leaves_the_gradients_is_told_at_its_first_step():
    """finish_step must leave every gradient zero: one that did not trained on, each step's
    gradient added into every later one's, with no error (a loss that still fell)."""
    net, data = _model()
    trainer = Trainer(net, PlainSGD(0.1, zero=False), batch_size=4, accuracy=None)
    with pytest.raises(SyncError, match=r"PlainSGD.finish_step\(\) left the gradient of 'fc\.\w+'"):
        trainer.fit(data, epochs=1)
    net, data = _model()
    trainer = Trainer(net, PlainSGD(0.1), batch_size=4, accuracy=None)
    assert len(trainer.fit(data, epochs=2)) == 2  # zeroing as the contract says, it trains


class Forgetful(PlainSGD):
    """Sets its own fields, and forgets SyncStrategy's."""

    def __init__(self, lr: float) -> None:
        self.lr, self.zero = lr, True


def test_a_sync_whose_init_skips_the_base_s_is_told_where_it_is_made():
    """It was made, and the Trainer failed later with a bare AttributeError: "'Forgetful'
    object has no attribute 'world_size'"."""
    with pytest.raises(
        TypeError, match=r"Forgetful.__init__ returned without calling super\(\).__init__"
    ):
        Forgetful(0.1)
    assert PlainSGD(0.1).world_size == 1  # one that calls it is made as before


class LoggingSync(LocalSync):
    """LocalSync logging each step's examples, its own start_step forgetting LocalSync's."""

    def start_step(self, examples: int) -> None:
        self.logged = examples


class QuietFinish(LocalSync):
    """LocalSync whose finish_step does its own thing only."""

    def finish_step(self) -> None:
        pass


@pytest.mark.parametrize(
    ("sync", "said"),
    [(LoggingSync, r"arrived outside a step: .* \(LoggingSync overrides start_step\(\): ")],
)
def test_a_local_sync_whose_override_skips_its_own_is_asked_about_it(sync, said):
    """ "arrived outside a step: call start_step(examples) before backward", where the Trainer
    had called start_step, and "call finish_step() first" after one: the override skipped
    LocalSync's own and the refusal named a call that had been made."""
    net, data = _model()
    trainer = Trainer(net, sync(SGD(lr=0.1)), batch_size=4, accuracy=None)
    with pytest.raises(SyncError, match=said + r"does it call super\(\)\.\w+\(\)\?\)$"):
        trainer.fit(data, epochs=1)


def test_a_local_sync_whose_finish_step_skips_its_own_still_ends_each_step():
    """LocalSync's step is the base's record now, which every finish_step ends (its wrapper),
    super() or not: the next start_step was refused as inside an unfinished step, though
    LocalSync's finish_step had nothing else to do (it updates each parameter as it fires)."""
    net, data = _model()
    trainer = Trainer(net, QuietFinish(SGD(lr=0.1)), batch_size=4, accuracy=None)
    trainer.fit(data, epochs=1)  # several steps


def test_a_sync_of_one_s_own_reads_the_step_s_examples():
    """Gradients arrive as sums over the step's examples; the count was only in LocalSync's
    private ``_examples``, or in a start_step of one's own. One SGD step of the mean gradient,
    as LocalSync takes it."""
    net, data = _model()
    start = [p.value.copy() for p in net.parameters()]
    values = []
    for sync in (PlainSGD(0.1), LocalSync(SGD(lr=0.1))):
        for p, value in zip(net.parameters(), start):
            p.value[...] = value
        Trainer(net, sync, batch_size=16, accuracy=None).fit(data, epochs=1)
        values.append([p.value.copy() for p in net.parameters()])
        assert sync.step_examples == 16
    for mine, local in zip(*values):
        np.testing.assert_allclose(mine, local, rtol=1e-12)
