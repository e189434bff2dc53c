"""A layer of one's own that draws through distconv's seam, as a contributor would write one:
the randomness and gradient-check tests train and check it."""

from __future__ import annotations

from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.layers.base import Layer
from distconv.layers.inputs import grad_target, values_of
from distconv.layers.randomness import step_generator, training, training_step
from distconv.parameter import UpdateCallback


class Jitter(Layer):
    """``y = x * (1 + n / 10)``, ``n`` standard normal from the step's generator in training;
    the identity otherwise. ``drawn`` holds each forward's ``n`` (None where it did not train).

    Args:
        wrong: a backward that forgets the noise (passes ``dz`` on as the identity would).
    """

    def __init__(self, wrong: bool = False) -> None:
        super().__init__()
        self.wrong, self.noise, self.drawn = wrong, None, []

    def _forward(self, x: Arg) -> Any:
        v = values_of(self, x)
        # in the input's dtype: a float64 noise made a float32 network's output float64
        self.noise = (
            step_generator().standard_normal(v.shape).astype(v.dtype) if training() else None
        )
        self.drawn.append(self.noise)
        return v if self.noise is None else v * (1 + self.noise / 10)

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        dx = grad_target(self.inputs[0])
        if dx is not None:
            dx += dz if self.noise is None or self.wrong else dz * (1 + self.noise / 10)


class Drawn(Layer):
    """``y = relu(x * (1 + n / 10))``; ``n`` standard normal from the step's generator, drawn
    in the input's dtype where ``in_input_dtype`` (what the gradient checks' float64 redo
    cannot judge: it draws other numbers there), else in float64 and cast.

    Args:
        wrong: a backward that forgets the noise, as :class:`Jitter`'s.
    """

    def __init__(self, in_input_dtype: bool, wrong: bool = False) -> None:
        super().__init__(act="relu")
        self.in_input_dtype, self.wrong = in_input_dtype, wrong

    def _forward(self, x: Arg) -> Any:
        v = values_of(self, x)
        if self.in_input_dtype:
            self.noise = step_generator().standard_normal(v.shape, dtype=v.dtype)
        else:
            self.noise = step_generator().standard_normal(v.shape).astype(v.dtype)
        return v * (1 + self.noise / 10)

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        if (dx := grad_target(self.inputs[0])) is not None:
            dx += dz if self.wrong else dz * (1 + self.noise / 10)


class StaleMask(Layer):
    """Inverted dropout (``p`` 0.5) whose forward draws a fresh mask from the step's generator
    but whose backward multiplies by the mask of its first training forward, kept for reuse:
    right at the first step, wrong at every later one. ``forwards`` counts its forwards."""

    def __init__(self) -> None:
        super().__init__()
        self.kept, self.forwards = None, 0

    def _forward(self, x: Arg) -> Any:
        v = values_of(self, x)
        self.forwards += 1
        if not training():
            return v
        mask = (step_generator().random(v.shape, dtype=np.float32) >= 0.5).astype(v.dtype) * 2
        if self.kept is None:  # the bug: the mask of the latest forward is the one to keep
            self.kept = mask
        return v * mask

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        if (dx := grad_target(self.inputs[0])) is not None:
            dx += dz * self.kept


class Shifted(Layer):
    """``y = relu(x + n / 10)``, a right backward; ``n`` standard normal from the step's
    generator, drawn in the input's dtype (what the gradient checks' float64 redo cannot
    judge). :meth:`below_kinks` puts every ReLU of a check just below its kink."""

    def __init__(self) -> None:
        super().__init__(act="relu")

    @staticmethod
    def below_kinks(shape: tuple, seed: int = 0) -> np.ndarray:
        """float32 inputs of ``shape`` at which, on the draws of a check of ``seed``, each
        output is 0, 2e-4 below its kink: within float32's step of 1e-3."""
        with training_step(seed, 0, 0) as generator:
            n = generator.standard_normal(shape, dtype=np.float32)
        return (-n / 10 - np.float32(2e-4)).astype(np.float32)

    def _forward(self, x: Arg) -> Any:
        v = values_of(self, x)
        return v + step_generator().standard_normal(v.shape, dtype=v.dtype) / 10

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        if (dx := grad_target(self.inputs[0])) is not None:
            dx += dz


class PreviousMask(Layer):
    """Inverted dropout (``p`` 0.5) whose backward multiplies by the mask of the forward before
    its latest (its first where there is none): a mask drawn a forward ahead, and one forward
    too early at every step of a training."""

    def __init__(self) -> None:
        super().__init__()
        self.previous = self.latest = None

    def _forward(self, x: Arg) -> Any:
        v = values_of(self, x)
        if not training():
            return v
        mask = (step_generator().random(v.shape, dtype=np.float32) >= 0.5).astype(v.dtype) * 2
        self.previous, self.latest = self.latest, mask
        return v * mask

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        if (dx := grad_target(self.inputs[0])) is not None:
            dx += dz * (self.latest if self.previous is None else self.previous)
