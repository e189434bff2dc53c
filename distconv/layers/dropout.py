"""Inverted dropout: in training each entry is kept with probability ``1 - p`` and scaled by
``1 / (1 - p)``, or zeroed; outside training the identity."""

from __future__ import annotations

from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import is_gpu_array, to_device
from distconv.layers.base import Layer
from distconv.layers.inputs import add_grad, grad_target, values_of
from distconv.layers.randomness import step_generator, training
from distconv.parameter import UpdateCallback


class Dropout(Layer):
    """``y = x * mask``, ``mask`` entries ``1 / (1 - p)`` (kept) or 0 (dropped), drawn at each
    training forward from the step's generator (:mod:`distconv.layers.randomness`); the
    identity in evaluation and prediction, and at ``p = 0``. Backward multiplies by the same
    mask. The mask is a pure function of the run's seed, the rank, the step and the pass, so a
    resumed run drops what an uninterrupted one dropped, and each rank and step its own.

    Args:
        p: the probability of dropping an entry, a number in ``[0, 1)``.
        name: layer name.
    """

    def __init__(self, p: float = 0.5, *, name: str | None = None) -> None:
        super().__init__(name=name)
        is_number = isinstance(p, (int, float, np.floating, np.integer)) and not isinstance(p, bool)
        if not is_number or not 0 <= p < 1:  # NaN too
            raise self.fail(f"p={p!r} must be a number in [0, 1) (the chance of dropping one)")
        self.p = float(p)
        self.mask: Any = None  # the last training forward's, for backward; None: the identity

    def settings(self) -> dict[str, Any]:
        """The base's settings and ``p``: ranks and a resume must agree on it."""
        return super().settings() | {"p": self.p}

    def _forward(self, x: Arg) -> Any:
        v = values_of(self, x)
        if self.p == 0 or not training():
            self.mask = None
            return v
        # Drawn on the host with numpy, then moved to the input's device: one code path and one
        # stream on either, so a GPU run drops the entries a CPU run drops (cupy's generators
        # have streams of their own and no SeedSequence), and a resume on either draws them
        # again. It costs a host draw and a copy of one byte an entry per step. Uniforms in
        # float32 whatever the dtype (half the host memory of float64's): a float32 gradient
        # check made again in float64 drops the same entries.
        keep = step_generator().random(v.shape, dtype=np.float32) >= self.p
        device = "gpu" if is_gpu_array(v) else "cpu"
        scale = v.dtype.type(1 / (1 - self.p))  # in the input's dtype: a float64 one widened it
        self.mask = to_device(keep, device).astype(v.dtype) * scale
        return v * self.mask

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        arg = self.inputs[0]
        if self.mask is not None:
            if arg.needs_grad:
                add_grad(arg, dz * self.mask)
        elif (dx := grad_target(arg)) is not None:
            dx += dz
