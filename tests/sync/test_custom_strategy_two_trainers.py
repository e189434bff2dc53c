"""One sync strategy trained by two Trainers of two models, one after the other (a sweep): the
docs give a strategy the firing order of the model it trains (``firing_order``, what a bucketed
transport lays its buffers out from). The Trainer gave it once per sync, at its first step ever,
so the second model's strategy kept the first model's names, and the second model's first step
was never checked (its gradients left nonzero, trained on silently)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv import Network, Trainer
from distconv.layers import FullyConnected, MSELoss
from distconv.optim import SGD
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync


def _model(prefix: str) -> tuple[Network, dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    net = Network()
    net.add(f"{prefix}1", FullyConnected(3, 4), "x")
    net.add(f"{prefix}2", FullyConnected(4, 1), f"{prefix}1")
    net.add("loss", MSELoss(), [f"{prefix}2", "target"])
    x = rng.standard_normal((16, 3)).astype(np.float32)
    return net, {"x": x, "target": rng.standard_normal((16, 1)).astype(np.float32)}


class Recording(LocalSync):
    """LocalSync that keeps every firing order it is given; ``keep`` leaves gradients nonzero
    once set (a bug of its own)."""

    def __init__(self) -> None:
        super().__init__(SGD(lr=0.01))
        self.orders: list[list[str]] = []
        self.keep = False

    def set_firing_order(self, names) -> None:
        super().set_firing_order(names)
        self.orders.append(list(names))

    def finish_step(self) -> None:
        super().finish_step()
        for p in self.params if self.keep else ():
            p.grad[...] = 1


def test_a_second_model_on_one_sync_gives_it_its_own_firing_order():
    sync = Recording()
    first, data = _model("a")
    Trainer(first, sync, batch_size=4, progress=False).fit(data, epochs=1)
    second, data = _model("b")
    trainer = Trainer(second, sync, batch_size=4, progress=False)
    trainer.fit(data, epochs=1)
    assert sync.firing_order == second.firing_order
    assert sync.orders == [first.firing_order, second.firing_order]
    trainer.fit(data, epochs=2)  # the same model again: given once
    assert len(sync.orders) == 2


def test_a_second_model_s_first_step_is_checked_too():
    sync = Recording()
    first, data = _model("a")
    Trainer(first, sync, batch_size=4, progress=False).fit(data, epochs=1)
    sync.keep = True
    second, data = _model("b")
    with pytest.raises(SyncError, match=r"left the gradient of 'b\w+\.\w+' nonzero"):
        Trainer(second, sync, batch_size=4, progress=False).fit(data, epochs=1)


def _deeper(depth: int) -> tuple[Network, dict[str, np.ndarray]]:
    """A sweep's models: ``depth`` layers fc1..fcN, a shallower one's names all in a deeper's."""
    rng = np.random.default_rng(0)
    net, last = Network(), "x"
    for k in range(1, depth + 1):
        net.add(f"fc{k}", FullyConnected(3, 1 if k == depth else 3), last)
        last = f"fc{k}"
    net.add("loss", MSELoss(), [last, "target"])
    x = rng.standard_normal((16, 3)).astype(np.float32)
    return net, {"x": x, "target": rng.standard_normal((16, 1)).astype(np.float32)}


def test_a_deeper_model_of_a_sweep_is_given_its_own_firing_order_and_checked():
    sync = Recording()
    shallow, data = _deeper(1)
    Trainer(shallow, sync, batch_size=4, progress=False).fit(data, epochs=1)
    deep, data = _deeper(2)  # fc1's names are the shallow model's: its order named no fc2
    Trainer(deep, sync, batch_size=4, progress=False).fit(data, epochs=1)
    assert sync.firing_order == deep.firing_order
    sync.keep = True
    deeper, data = _deeper(3)
    with pytest.raises(SyncError, match=r"left the gradient of 'fc\d\.\w+' nonzero"):
        Trainer(deeper, sync, batch_size=4, progress=False).fit(data, epochs=1)
