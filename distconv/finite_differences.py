"""The numeric side of :mod:`distconv.gradient_check`: the scalar it differentiates
(:class:`Objective`, ``f = sum(output * r)`` of a layer; :class:`NetworkObjective`, the sum
of a network's loss), its central finite differences along a direction, and their comparison
with an analytic gradient, judged above the rounding of the outputs.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import get_array_module, to_host
from distconv.float64_redo import AnotherFunction, rounds_inside, widened
from distconv.kept_hint import kept_hint
from distconv.layers.base import Layer
from distconv.layers.randomness import training_step
from distconv.messages import named
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


#: (step, tolerance on the relative difference) per dtype
DEFAULTS = {np.dtype(np.float64): (1e-6, 1e-6), np.dtype(np.float32): (1e-3, 2e-2)}


def central(obj: Objective, owner: Any, direction: Any, step: float, name: str) -> tuple:
    """``(f(v + step*d) - f(v - step*d)) / (2 step)``, restoring ``v`` afterwards, ``d`` as
    taken: rounded to ``v``'s dtype (``3000 + 1e-3`` is ``3000 + 9.8e-4`` in float32), and the
    one-sided slopes ``(f(v + step*d) - f(v)) / step`` and ``(f(v) - f(v - step*d)) / step``.

    Layers read ``param.value`` and ``arg.value`` at each forward, so swapping the attribute
    perturbs a parameter and an input alike. ValueError: rounding loses the step of an entry.
    """
    original, d, base = owner.value, to_host(direction), owner.value.astype(np.float64)
    plus, minus = ((base + s * step * direction).astype(original.dtype) for s in (1, -1))
    taken = to_host(plus.astype(np.float64) - minus.astype(np.float64)) / (2 * step)
    taken = np.where(np.isfinite(taken), taken, d)  # an inf entry stays put: d, as it was
    if bool(((taken == 0) & (d != 0)).any()):
        what = f"{name} to {original.dtype}"
        raise ValueError(
            f"{obj.subject}: step {step:g} is lost rounding {what}; give a larger step"
        )
    f_plus, f_minus = obj.values_at(owner, plus, minus)
    sides = ((f_plus - obj.f0) / step, (obj.f0 - f_minus) / step)
    return (f_plus - f_minus) / (2 * step), taken, sides


def check_array(
    obj: Objective,
    owner: Any,
    grad: Any,
    step: float,
    tol: float,
    elements: int,
    rng: np.random.Generator,
    name: str,
    *,
    elements_first: bool = False,
) -> float:
    """The worst relative difference of ``grad``, the gradient of ``owner.value`` called
    ``name``, from finite differences of ``obj`` with ``step``: along a random direction with
    the gradient's signs, and at ``elements`` single entries drawn by ``rng``.

    Args:
        elements_first: check the single entries before the direction, so that a gradient
            wrong throughout is named at an entry (``name[i, j]``), not along the direction;
            the direction comes first otherwise, and decides whether it can be judged at all.

    Raises:
        AssertionError: one differs by more than ``tol`` (:func:`compare`).
        ValueError: the gradient cannot be judged in the output's dtype, or ``step`` is lost
            rounding an entry.
    """
    xp = get_array_module(grad)
    g = to_host(grad).astype(np.float64)
    # Paddle's direction: random magnitudes, signs of the gradient (random where it is zero).
    signs = np.where(g != 0, np.sign(g), rng.choice([-1.0, 1.0], g.shape))
    direction = signs * rng.uniform(0.5, 1.5, g.shape)
    flat = rng.choice(g.size, size=min(elements, g.size), replace=False)

    def along() -> float:
        return compare(obj, owner, xp.asarray(direction), g, step, tol, name, resolve=True)

    def at(k: int) -> float:
        e = np.zeros(g.shape)
        e.flat[k] = 1.0
        idx = np.unravel_index(k, g.shape)
        return compare(obj, owner, xp.asarray(e), g, step, tol, f"{name}{[int(i) for i in idx]}")

    entries = [lambda k=k: at(k) for k in flat]
    checks = [*entries, along] if elements_first else [along, *entries]
    return max(check() for check in checks)


def compare(
    obj: Objective,
    owner: Any,
    direction: Any,
    g: np.ndarray,
    step: float,
    tol: float,
    name: str,
    resolve: bool = False,
    retry: bool = True,
    first: float | None = None,
) -> float:
    """The relative difference of ``g``'s and the numeric derivative along ``direction`` taken.

    Where they differ, a central difference across a kink (a ReLU, a max pool's choice) or a
    curve that bends within the step may be no derivative at the point, so the comparison is
    made again and its verdict stands: in float32, in float64 (:func:`widened`) at float64's
    step; in float64, at a step ten times smaller, against the floor of that step only where
    it moves the central difference beyond rounding (a kink the first step crossed moves it;
    along a line it stays, and the smaller step's ten times higher floor passed a wrong
    gradient of a small derivative). Only where that cannot be made (a layer that computes in
    its own dtype, a smaller step lost to rounding) or float64 computes another function
    (:class:`~distconv.float64_redo.AnotherFunction`) does this one decide.

    Args:
        resolve: the direction follows the gradient's signs, so a derivative along it that
            is not zero and is below the floor must stand above the outputs' rounding noise to
            be judged at all.
        retry: whether a float64 comparison that fails is made again at a smaller step.
        first: the retry's: the first step's numeric derivative; where this one is within
            rounding of it, the first step's floor is kept.

    Raises:
        AssertionError: they differ by more than ``tol``.
        ValueError: ``resolve`` and the derivative along ``direction`` is within the noise
            and below the floor; or, in float32 with no float64 comparison to be had, they
            differ where ``f`` bends within the step (its one-sided slopes differ by more
            than rounding) and ``g``'s derivative lies between those slopes, or outside by
            no more than their gap and ``tol``: a kink's, which cannot be judged there; or
            anywhere ``f`` bends so, where float64 computes another function.
    """
    numeric, taken, (right, left) = central(obj, owner, direction, step, name)
    analytic = float((g * taken).sum())
    # Rounding in f limits the numeric derivative to about eps*|f|/step: derivatives below that
    # floor (a dead ReLU, a zero entry) are judged on an absolute scale instead of their own.
    eps = float(np.finfo(obj.dtype).eps)
    floor = 10 * eps * max(abs(obj.f0), 1.0) / (step * tol)
    # a retry that moved the central difference by no more than rounding does at this step and
    # the first's, ten times larger, found no kink: judged against the first step's floor
    rounded = max(eps * max(abs(obj.f0), 1.0), obj.rounding) * 1.1 / step
    if first is not None and abs(numeric - first) <= rounded:
        floor /= 10
    noise = 10 * obj.rounding / step  # what rounding the outputs may move ``numeric`` by
    # within the noise and judged against the floor from |f0|, any gradient of this size passed:
    # in float32 under a large output, a backward that added nothing to a weight.
    # Above the floor it is judged on its own scale, where a wrong one fails; refused there too,
    # a float32 FC or convolution whose derivatives agreed to 1e-4 could not be checked:
    # the noise bounds the worst case, and grows with the count of outputs
    if resolve and max(abs(analytic), abs(numeric)) < min(noise, floor) and (analytic or numeric):
        raise ValueError(
            f"{obj.subject}: the gradient of {name} cannot be judged in {obj.dtype}: along the "
            f"gradient it is {analytic:.4g} (numeric {numeric:.4g}), within the {noise:.3g} "
            "that rounding the outputs may move a finite difference by; check in float64 or "
            "on smaller outputs"
        )
    diff = abs(analytic - numeric) / max(abs(analytic), abs(numeric), floor)
    if diff <= tol:
        return diff
    why, another = "", None  # why float32 has no float64 comparison, for the message
    try:
        if obj.dtype != np.float64:
            narrow, wide_step = np.dtype(owner.value.dtype), DEFAULTS[np.dtype(np.float64)][0]
            with widened(obj) as (wide, why):
                if wide is None:
                    pass
                elif rounds_inside(wide, owner, direction, (wide_step, step), narrow):
                    why = f"it rounds {name} to {narrow} inside"
                else:
                    return compare(wide, owner, direction, g, wide_step, tol, name)
        elif retry:
            again = (obj, owner, direction, g, step / 10, tol, name)
            return compare(*again, retry=False, first=numeric)
    except AnotherFunction as exc:  # the redo's verdict would judge another function
        why, another = str(exc), exc
    except (TypeError, ValueError) as exc:  # a smaller step lost to rounding, float64 refused
        why = f"in float64 it raised {named(exc)}"
    # across a kink the derivative at the point is one side's slope; one outside both, by more
    # than their gap, is off (a curve's slopes part too: a float32-only tanh's halved
    # gradient was "a kink?"). Not where float64 computes another function: a right layer
    # whose step crossed kinks on both sides, of several entries, lay outside both slopes
    slack = tol * max(abs(analytic), abs(numeric), floor) + 2 * noise + abs(right - left)
    between = min(right, left) - slack <= analytic <= max(right, left) + slack
    between = between or another is not None
    if obj.dtype != np.float64 and abs(right - left) > 2 * noise and between:
        raise ValueError(
            f"{obj.subject}: the gradient of {name} cannot be judged in {obj.dtype}: f bends "
            f"within the step of {step:g} (one-sided slopes {right:.6g} and {left:.6g}: a "
            f"kink?), analytic {analytic:.10g}, numeric {numeric:.10g}, and "
            + (
                f"it has no float64 comparison ({why}): check it where the step crosses no kink "
                "(another seed or other inputs), or let it compute in float64"
                if another is None
                else f"{another}: {another.advice}"
            )
        )
    # NaN too: a comparison with NaN is False, and NaN passed
    raise AssertionError(
        f"{obj.subject}: gradient of {name} is off: analytic {analytic:.10g}, "
        f"numeric {numeric:.10g}, relative difference {diff:.3g} > {tol}"
        + (kept_hint(obj, owner) if numeric == 0 and analytic != 0 else "")
        + ("" if another is None else f"; judged in {obj.dtype}, as {another}: {another.advice}")
    )
