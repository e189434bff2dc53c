"""A layer of one's own with the mistakes a layer author makes in its backward, one at a time,
and the small network and steps that train it: what the tests of the Network's firing checks
run through LocalSync, through MPISync under ``mpiexec -n 2``
(``tests/mpi/run_layer_mistakes.py``) and through the parameter server.

``ScaleShift`` is ``y = x * g + b`` per feature of an ``(N, C)`` input. The network is
``ss1 -> ss2 -> fc -> loss``, where ``ss2`` shares ``ss1``'s weight (one Parameter, two users):
``ss1``, the weight's last user in backward, fires it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from distconv.arg import Arg
from distconv.init import set_seed
from distconv.layers import FullyConnected, MSELoss
from distconv.layers.base import Layer
from distconv.layers.inputs import values_of
from distconv.network import Network
from distconv.optim import create_optimizer
from distconv.parameter import Parameter, UpdateCallback
from distconv.sync.base import SyncStrategy
from distconv.sync.local import LocalSync

#: what ``mistake`` may name (None: a correct layer)
MISTAKES = (
    "twice",  # the bias fires twice in one pass
    "rebind",  # p.grad = p.grad + g: another array, of the right shape and dtype (allowed)
    "rebind_shape",  # p.grad = (p.grad + g)[:, None]
    "rebind16",  # p.grad = (p.grad + g).astype(np.float16)
    "early",  # the shared weight fires, then the layer adds its share into it
)
#: the examples of each global step (the last one uneven over two ranks)
STEPS = (8, 8, 5)


class ScaleShift(Layer):
    """``y = x * g + b`` per feature; ``weight``: another ScaleShift's, to share it."""

    def __init__(
        self, channels: int, *, weight: Parameter | None = None, mistake: str | None = None
    ) -> None:
        super().__init__()
        self.mistake = mistake
        if weight is None:
            self.weight = self.new_param("weight", np.linspace(0.5, 1.5, channels))
        else:
            self.weight = self.add_param("weight", weight)
        self.bias = self.make_bias("bias", (channels,), np.float64)

    def _forward(self, x: Arg) -> np.ndarray:
        return values_of(self, x) * self.weight.value + self.bias.value

    def _backward(self, dz: np.ndarray, callback: UpdateCallback) -> None:
        (x,) = self.inputs
        m = self.mistake
        if x.needs_grad:
            gx = dz * self.weight.value  # before the weight fires: the callback may change it
            x.grad = gx if x.grad is None else x.grad + gx
        gb = dz.sum(axis=0)
        if m == "rebind":
            self.bias.grad = self.bias.grad + gb
        elif m == "rebind_shape":
            self.bias.grad = (self.bias.grad + gb)[:, None]
        elif m == "rebind16":
            self.bias.grad = (self.bias.grad + gb).astype(np.float16)
        else:
            self.bias.grad += gb
        self.bias.inc_update(callback)
        if m == "twice":
            self.bias.inc_update(callback)
        if m == "early":
            self.weight.inc_update(callback)
        self.weight.grad += (dz * x.value).sum(axis=0)
        if m != "early":
            self.weight.inc_update(callback)


def build(mistake: str | None = None) -> Network:
    """``ss1 -> ss2 -> fc -> loss``, ``ss2`` sharing ``ss1``'s weight; ``mistake`` in ``ss1``."""
    set_seed(1)
    net = Network()
    first = ScaleShift(3, mistake=mistake)
    net.add("ss1", first, "x")
    net.add("ss2", ScaleShift(3, weight=first.weight), "ss1")
    net.add("fc", FullyConnected(3, 1, dtype=np.float64), "ss2")
    net.add("loss", MSELoss(), ["fc", "target"])
    return net


def batches(seed: int = 4) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The global batches ``(x, target)`` of :data:`STEPS`, alike on every rank."""
    rng = np.random.default_rng(seed)
    for n in STEPS:
        x = rng.standard_normal((n, 3))
        yield x, np.tanh(x[:, :1]) + 0.5 * x[:, 1:2]


def step(net: Network, sync: SyncStrategy, x: np.ndarray, target: np.ndarray) -> None:
    """One step on ``(x, target)``; one that raises is abandoned (as the Trainer does) and its
    error goes on."""
    sync.start_step(len(x))
    try:
        net.forward({"x": Arg(x, needs_grad=False), "target": Arg(target, needs_grad=False)})
        net.backward(sync, loss="loss", loss_scale=len(x))
    except BaseException:
        sync.abandon_step()
        raise
    sync.finish_step()


def train(net: Network, sync: SyncStrategy, rank: int = 0, world: int = 1) -> None:
    """Every global batch as one :func:`step`, this rank taking examples ``rank::world``."""
    for x, t in batches():
        step(net, sync, x[rank::world], t[rank::world])


def weights(net: Network) -> dict[str, np.ndarray]:
    """Each parameter's value by name, copied."""
    return {p.name: np.array(p.value) for p in net.parameters()}


def local_run(mistake: str | None) -> tuple[dict[str, np.ndarray], LocalSync]:
    """Train :func:`build` with ``mistake`` through LocalSync (SGD); its weights, the sync."""
    net = build(mistake)
    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    sync.setup(net.parameters())
    train(net, sync)
    return weights(net), sync


def trained_as(layer_class: type, form: str, net: Network) -> None:
    """Train ``net`` (:func:`build`'s) through LocalSync, its layer ``ss1`` made a
    ``layer_class`` of ``form``: what the guard says of it is raised."""
    net.layers["ss1"].__class__ = layer_class
    net.layers["ss1"].form = form
    sync = LocalSync(create_optimizer("sgd", lr=0.1))
    sync.setup(net.parameters())
    train(net, sync)
