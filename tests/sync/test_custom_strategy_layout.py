"""A strategy may give a parameter a new array at ``finish_step`` (``docs/architecture.md``: one
that adopts the buffer it received), but of the shape, dtype and device its layers and gradient
have. One that reshaped a weight failed the next forward in the layer's words ("filters (4, 3)
do not fit ..."), blaming the layer; one that widened it to float64 trained on without a word,
its gradients still float32. The Trainer names the strategy and the parameter instead."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Network, Trainer
from distconv.layers import FullyConnected, MSELoss
from distconv.optim import SGD
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync


def _model() -> tuple[Network, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    net = Network()
    net.add("fc1", FullyConnected(3, 4), "x")
    net.add("fc2", FullyConnected(4, 1), "fc1")
    net.add("loss", MSELoss(), ["fc2", "target"])
    x = rng.standard_normal((16, 3)).astype(np.float32)
    return net, {"x": x, "target": rng.standard_normal((16, 1)).astype(np.float32)}


class Adopts(LocalSync):
    """Replaces ``fc1``'s weight at the step ``at`` by ``change(value)``, as a transport that
    adopts a received buffer would, wrongly."""

    def __init__(self, change, at: int) -> None:
        super().__init__(SGD(lr=0.01))
        self.change, self.at, self.steps = change, at, 0

    def finish_step(self) -> None:
        super().finish_step()
        self.steps += 1
        if self.steps == self.at:
            w = next(p for p in self.params if p.name == "fc1.weight")
            w.value = self.change(w.value)


@pytest.mark.parametrize("at", [1, 3])
@pytest.mark.parametrize(
    "change, words",
    [
        (lambda v: v.reshape(-1), r"shape \(12,\) now, \(4, 3\) when the fit began"),
        (lambda v: v.T.copy(), r"shape \(3, 4\) now, \(4, 3\) when the fit began"),
        (lambda v: v.astype(np.float64), r"dtype float64 now, float32 when the fit began"),
    ],
)
def test_a_strategy_that_changes_a_parameter_s_layout_is_named(change, words, at):
    net, data = _model()
    sync = Adopts(change, at)
    trainer = Trainer(net, sync, batch_size=4, progress=False)
    with pytest.raises(SyncError, match=rf"Adopts changed parameter 'fc1.weight': {words}"):
        trainer.fit(data, epochs=2)


def test_a_strategy_that_adopts_a_buffer_of_the_same_layout_trains_on():
    net, data = _model()
    sync = Adopts(lambda v: v.copy(), 1)
    Trainer(net, sync, batch_size=4, progress=False).fit(data, epochs=2)
    assert sync.steps == 8


def test_a_type_changed_by_hand_between_fits_is_refused_as_the_trainers_own_words():
    """A cast by hand between two fits of one Trainer is no strategy's change: the fit names
    the cast and its ways on (a new Trainer, or a cast back), before the strategy's check; it
    trained float64 while its checkpoints recorded float32."""
    net, data = _model()
    trainer = Trainer(net, LocalSync(SGD(lr=0.01)), batch_size=4, progress=False)
    trainer.fit(data, epochs=1)
    for p in net.parameters():
        p.cast(np.float64)
    with pytest.raises(TypeError, match=r"parameters are float64 now, not the float32"):
        trainer.fit({k: v.astype(np.float64) for k, v in data.items()}, epochs=2)


class BroadcastsWide(LocalSync):
    """Gives each parameter the float64 array its broadcast received, as a shared-memory
    transport reading a float64 buffer would."""

    steps = 0

    def broadcast_parameters(self) -> None:
        for p in self.params:
            p.value = p.value.astype(np.float64)

    def start_step(self, examples: int) -> None:
        super().start_step(examples)
        self.steps += 1


def test_a_strategy_whose_setup_changes_a_layout_is_named_before_a_step():
    net, data = _model()
    sync = BroadcastsWide(SGD(lr=0.01))
    trainer = Trainer(net, sync, batch_size=4, progress=False)
    with pytest.raises(SyncError, match=r"BroadcastsWide changed parameter 'fc1.weight': dtype"):
        trainer.fit(data, epochs=1)
    # no step began (the first step's check raised too, once the step trained: pos.step 0)
    assert (sync.steps, trainer.pos.step) == (0, 0)
