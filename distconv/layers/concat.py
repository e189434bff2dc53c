"""Column-wise concatenation: plain (Concatenate) and through projections (Concatenate2)."""

from __future__ import annotations

from typing import Any

from distconv.arg import Arg
from distconv.backend import get_array_module
from distconv.kernels.activation import ActivationFunction
from distconv.kernels.shape import volume
from distconv.layers.base import Layer
from distconv.layers.inputs import grad_target, values_of
from distconv.layers.mixed import ProjectionLayer
from distconv.parameter import UpdateCallback


class Concatenate(Layer):
    """The inputs' columns side by side (Paddle's ``ConcatenateLayer``); no parameters.

    Args:
        act: activation applied to the concatenation.
        name: layer name.

    Shape:
        - Inputs: ``(N, *)`` each, flattened per sample to ``(N, w_i)``.
        - Output: ``(N, sum(w_i))``; sequence offsets pass through from the first input.
    """

    num_inputs = (1, None)

    def __init__(
        self, act: str | ActivationFunction | None = None, *, name: str | None = None
    ) -> None:
        super().__init__(act=act, name=name)

    def _forward(self, *inputs: Arg) -> Any:
        rows = []
        for i, a in enumerate(inputs):
            if a.value is None or a.value.ndim < 1:
                raise self.fail(f"input {i} carries no array value (ids only?)")
            v = values_of(self, a)  # integer rows: an activation truncated them (sigmoid to 0)
            rows.append(v.reshape(v.shape[0], volume(v.shape[1:])))
        heights = [r.shape[0] for r in rows]
        if len(set(heights)) > 1:
            raise self.fail(f"inputs have different numbers of rows: {heights}")
        self._widths = [r.shape[1] for r in rows]
        return get_array_module(*rows).concatenate(rows, axis=1)

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        at = 0
        for a, w in zip(self.inputs, self._widths):
            dx = grad_target(a)
            if dx is not None:
                dx += dz[:, at : at + w].reshape(dx.shape)
            at += w


class Concatenate2(ProjectionLayer):
    """Each input through its own projection into its own columns (Paddle's ``ConcatenateLayer2``).

    Projection ``i`` writes columns ``sum(w_0..w_{i-1}) : sum(w_0..w_i)`` of the output, where
    ``w_i`` is its ``out_width``; then one optional bias over the whole output, and activation.

    Args:
        projections: one per input, in input order.
        size: output columns, checked against ``sum(w_i)`` when given.
        bias: add a trainable bias.
        shared_bias: one bias per channel (every projection a convolution with the same output
            image size, so the output is their channels stacked).
        act: activation.
        dtype: bias dtype.
        name: layer name.

    Shape:
        - Inputs: whatever each projection reads, all with ``N`` rows.
        - Output: ``(N, sum(w_i))``.

    Attributes:
        bias: ``(size,)``, ``(sum of out_channels,)`` when shared, or None.
    """

    projection_optional = False
    takes_operators = False

    def _layout(self) -> tuple[int, list[slice | None]]:
        columns, at = [], 0
        for p in self.projections:
            columns.append(slice(at, at + p.out_width))
            at += p.out_width
        return self._check_size(at), columns

    def _bias_channels(self) -> int:
        parts = self._conv_parts()
        sizes = {p.output_size for p in parts}
        if len(sizes) > 1:
            raise self.fail(
                f"shared_bias needs one output image size, projections give {sorted(sizes)}"
            )
        return sum(p.out_channels for p in parts)
