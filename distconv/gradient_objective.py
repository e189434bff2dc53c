"""The scalar a gradient check differentiates: :class:`Objective`, ``f = sum(output * r)`` of
a layer, ``r`` drawn once; :class:`NetworkObjective`, the sum of a network's loss. Each
forward of it trains on the same draws, its first two forwards tell a layer whose output
changes between them, and it gives ``f`` at other values of a parameter or an input.

:mod:`distconv.finite_differences` takes its central differences and compares them with an
analytic gradient (:func:`~distconv.finite_differences.compare`), and imports these names for
its importers.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import get_array_module
from distconv.layers.base import Layer
from distconv.layers.randomness import training_step
from distconv.network import Network


class Objective:
    """``f = sum(layer(*inputs) * r)`` with ``r`` drawn once.

    What the checks read of it, the same for :class:`NetworkObjective`: ``subject`` (what the
    messages name), ``inputs`` and ``input_names``, ``dtype`` (the output's), ``f0``,
    ``rounding``, ``params`` (the parameters ``f`` depends on), :meth:`value` and
    :meth:`backward`.

    Every forward trains, on the same draws (:meth:`pinned`), but a decoy before the first
    and one before the first backward's, where a layer drew (:meth:`_first_output`).
    """

    #: id of a parameter -> the arrays it held before the check swapped in copies of them
    originals: dict[int, tuple] = {}
    #: whether the next backward's forward follows a decoy (:meth:`_backward_forward`)
    decoy_due = False

    def __init__(
        self, layer: Layer, inputs: list[Arg], rng: np.random.Generator, draws: int = 0
    ) -> None:
        self.layer, self.inputs, self.params = layer, inputs, layer.parameters()
        self.draws = draws
        self.input_names = [f"input {i}" for i in range(len(inputs))]
        out = self._first_output()
        xp = get_array_module(out)
        self.r = xp.asarray(rng.uniform(0.5, 1.5, out.shape) * rng.choice([-1, 1], out.shape))
        self._refuse_changing(self._settle(out, self.r.astype(out.dtype)))

    @property
    def subject(self) -> str:
        return str(self.layer)

    def pinned(self) -> AbstractContextManager[np.random.Generator]:
        """A context in which forwards train (a dropout drops) on a generator made afresh from
        :attr:`draws` (:mod:`distconv.layers.randomness`): each forward of the check draws the
        same numbers, so finite differences judge a layer that draws (a fresh mask at each
        forward gave numeric derivatives of 3.6e7 against 23)."""
        return training_step(self.draws, 0, 0)

    def _output(self) -> Any:
        """The output's array after a fresh forward at the values as they are now."""
        with self.pinned():
            return self._forward()

    def _first_output(self) -> Any:
        """:meth:`_output`, after a decoy forward on other draws (step 1 of :attr:`draws`, the
        check's being step 0's) where a layer drew from them. Each pinned forward draws the same
        mask, and a backward that used the mask of the layer's first forward, not its latest,
        passed both checks (wrong at every step of a training after the first); it now uses the
        decoy's. The decoy is the first forward, its output kept where its generator is as it
        was made (nothing drew), so it costs a forward only where a layer drew."""
        with training_step(self.draws, 0, 1) as generator:
            made = _drawn_from(generator)
            out = self._forward()
            if _drawn_from(generator) == made:
                return out
        self.decoy_due = True
        return self._output()

    def _backward_forward(self) -> None:
        """The fresh forward a backward starts from, pinned; the first, where a layer drew,
        after a decoy on other draws (step 2 of :attr:`draws`): a backward that used the mask
        of the forward before its latest passed both checks (the forwards before it all drew
        the check's), wrong at every step of a training."""
        if self.decoy_due:
            self.decoy_due = False
            with training_step(self.draws, 0, 2):
                self._forward()
        with self.pinned():
            self._forward()

    def _forward(self) -> Any:
        """The output's array of a forward in the context in force."""
        return self.layer.forward(*self.inputs).value

    def _settle(self, out: Any, r: Any) -> float:
        """The output's dtype, ``f0`` (a second forward) and its rounding, from the first
        ``out`` and ``r``; returns ``f`` of ``out``, for :meth:`_refuse_changing`."""
        xp = get_array_module(out)
        self.r, self.dtype = r, np.dtype(out.dtype)
        first = self._f(out)  # before the second forward, which may write into out's buffer
        self.f0 = self.value()
        # what rounding each output to its dtype may move f by: |f0| alone is far less when
        # the terms of f cancel (r's signs are random)
        self.rounding = float(np.finfo(self.dtype).eps) * float(
            xp.sum(xp.abs(out.astype(np.float64) * self.r))
        )
        return first

    def _refuse_changing(self, first: float) -> None:
        """Keep ``f`` of the first forward, ``first``, for :meth:`changed`; ValueError where it
        and ``f0``, of the second at the same inputs and parameters, are finite on one side
        only (a NaN drawn at random: the not-finite refusals would blame the layer)."""
        self.first = first
        if np.isfinite(first) != np.isfinite(self.f0) and (changed := self.changed(None)):
            raise changed

    def moved(self, f: float) -> bool:
        """Whether ``f`` differs from ``f0`` by more than 10 times :attr:`rounding`, the scale
        :func:`compare` takes for noise (True where one of them alone is NaN)."""
        return not abs(f - self.f0) <= 10 * self.rounding

    def changed(self, failure: BaseException | None) -> ValueError | None:
        """A ValueError saying that the output changed between the first two forwards, where
        ``f`` of them differ by more than 10 times :attr:`rounding` (the scale :func:`compare`
        takes for noise), naming ``failure`` (a comparison's); None where they do not.

        A layer that draws a fresh random mask, or keeps state from its last forward, gave
        numeric derivatives of 3.6e7 against 23 and was called wrong. It is asked only where a
        comparison failed: a right layer that adds in another order at each forward (threads
        of a BLAS or a pool adding partial sums; a device) moved ``f`` by more than that over
        20000 inputs to 2 outputs, was refused as random, and its finite differences agree."""
        first, f0 = self.first, self.f0
        if not (np.isfinite(first) or np.isfinite(f0)):
            return None  # not finite either time: the not-finite refusals name what holds it
        if not self.moved(first):
            return None
        return ValueError(
            f"{self.subject}: the output changed between two forwards at the same inputs and "
            f"parameters (f {first:.10g}, then {f0:.10g}): it is random, depends on state "
            "kept from an earlier forward, or adds in another order each time, and no gradient "
            "can be judged; make it deterministic for the check (draw from distconv.layers."
            "randomness.step_generator(), which the checks pin, or draw the random part once "
            "and reuse it)" + ("" if failure is None else f"; it failed so: {failure}")
        )

    def _f(self, out: Any) -> float:
        """``f`` of the output array ``out``: ``sum(out * r)``, in float64."""
        return float(get_array_module(out).sum(out.astype(np.float64) * self.r))

    def value(self) -> float:
        """``f`` at the parameters and inputs as they are now (a fresh forward)."""
        return self._f(self._output())

    def values_at(self, owner: Any, *values: Any) -> list[float]:
        """``f`` with ``owner.value`` set to each of ``values`` in turn; its own value put
        back after, also where one raises."""
        original, found = owner.value, []
        try:
            for value in values:
                owner.value = value
                found.append(self.value())
        finally:
            owner.value = original
        return found

    def backward(self, callback: Any) -> None:
        """Fresh forward, seed ``d f / d output = r``, backward."""
        self._backward_forward()
        self.layer.output.grad = self.r.copy()
        self.layer.backward(callback)


def _drawn_from(generator: np.random.Generator) -> tuple:
    """What tells that a layer drew from ``generator``: its state, and the children spawned
    from its seed (``spawn()`` draws from a child and leaves the state as it was)."""
    bits = generator.bit_generator
    seeds = getattr(bits, "seed_seq", getattr(bits, "_seed_seq", None))  # numpy < 1.25: _
    return bits.state, getattr(seeds, "n_children_spawned", None)


class NetworkObjective(Objective):
    """``f = sum(output of layer loss)`` of ``net`` fed ``feeds``: the scalar whose gradient
    ``net.backward(callback, loss=loss)`` computes (it seeds each entry of that output with 1;
    the Trainer's ``loss_scale`` scales both alike). ``inputs`` are the fed Args the network
    reads, in :attr:`~distconv.network.Network.feed_names` order."""

    def __init__(self, net: Network, feeds: dict[str, Arg], loss: str, draws: int = 0) -> None:
        self.net, self.feeds, self.loss, self.params = net, feeds, loss, net.parameters()
        self.draws = draws
        names = [name for name in net.feed_names if isinstance(feeds.get(name), Arg)]
        self.inputs = [feeds[name] for name in names]
        self.input_names = [f"input {name}" for name in names]
        out = self._first_output()
        self._refuse_changing(self._settle(out, get_array_module(out).ones_like(out)))

    @property
    def subject(self) -> str:
        return f"network (loss {self.loss!r})"

    def _forward(self) -> Any:
        return self.net.forward(self.feeds)[self.loss].value

    def backward(self, callback: Any) -> None:
        """Fresh forward, backward from the loss."""
        self._backward_forward()
        self.net.backward(callback, loss=self.loss)
