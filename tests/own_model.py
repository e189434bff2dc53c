"""A model of one's own for the equivalence check (``Job(model=..., dataset=...)``): a layer
written from the docs, whose weight two layers share, between fully connected layers.

``Affine`` is ``y = x * g + b`` per feature; ``Affine(n, weight=other.g)`` shares ``g``.
``AssignsScale`` is the same layer with one mistake: its backward assigns the weight's gradient
(``g.grad[...] = ...``) instead of adding it, which loses the share of the user whose backward
ran before it.
"""

from __future__ import annotations

import functools

import numpy as np

from distconv import Network, Parameter
from distconv.layers import FullyConnected, MSELoss
from distconv.layers.base import Layer
from distconv.layers.inputs import values_of

#: features in and out of each layer
WIDTH = 4


def near_one(shape, fan_in, fan_out, rng):
    """An initialiser of one's own: 1 and a little noise drawn from the seeded stream."""
    return 1 + 0.1 * rng.standard_normal(shape)


class Affine(Layer):
    """``x * g + b`` per feature; ``weight=`` shares another layer's ``g``."""

    def __init__(self, n: int, *, weight: Parameter | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.n = n
        self.g = self.make_weight(
            "g", (n,), init=near_one, fan_in=n, fan_out=n, dtype=np.float64, shared=weight
        )
        self.b = self.make_bias("b", (n,), np.float64)

    def settings(self):
        return super().settings() | {"n": self.n}

    def _forward(self, x):
        return values_of(self, x) * self.g.value + self.b.value

    def _backward(self, dz, callback):
        x = self.inputs[0]
        if x.needs_grad:
            x.grad += dz * self.g.value
        if not self.g.static:
            self.add_to_g((dz * x.value).sum(0))
        if not self.b.static:
            self.b.grad += dz.sum(0)
        self.g.inc_update(callback)
        self.b.inc_update(callback)

    def add_to_g(self, share) -> None:
        self.g.grad += share


class AssignsScale(Affine):
    """``Affine`` whose backward assigns its share of ``g``'s gradient: wrong where ``g`` is
    shared (the other user's share is lost) or gradients accumulate over passes."""

    def add_to_g(self, share) -> None:
        self.g.grad[...] = share


def own_model(seed: int, broken: bool = False) -> Network:
    """``Affine -> FC tanh -> Affine (sharing the first's g) -> FC -> MSELoss``; with
    ``broken`` the first ``Affine``, whose backward runs last, assigns its share. ``seed`` is
    the check's: it has called ``set_seed(seed)``, which ``make_weight`` draws from."""
    first = (AssignsScale if broken else Affine)(WIDTH)
    net = Network()
    net.add("a1", first, "x")
    net.add("fc1", FullyConnected(WIDTH, WIDTH, act="tanh", dtype=np.float64), "a1")
    net.add("a2", Affine(WIDTH, weight=first.g), "fc1")
    net.add("fc2", FullyConnected(WIDTH, 1, dtype=np.float64), "a2")
    net.add("loss", MSELoss(), ["fc2", "target"])
    return net


#: the broken model, a module-level partial (a job's model is pickled to spawned ranks)
broken_model = functools.partial(own_model, broken=True)


def own_data(examples: int) -> dict[str, np.ndarray]:
    """``examples`` rows of ``x`` and a target that depends on them, the same at every call."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((examples, WIDTH))
    return {"x": x, "target": np.tanh(x[:, :1] - 0.5 * x[:, 1:2])}
