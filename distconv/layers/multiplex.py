"""Multiplex: each output row is copied from the input its id chooses."""

from __future__ import annotations

from typing import Any

from distconv.arg import Arg
from distconv.backend import get_array_module
from distconv.kernels.activation import ActivationFunction
from distconv.layers.base import Layer
from distconv.layers.inputs import grad_target, values_of
from distconv.parameter import UpdateCallback


class Multiplex(Layer):
    """``y[r] = inputs[1 + ids[r]][r]``: a per-row switch between candidate inputs.

    Paddle's ``MultiplexLayer``. Input 0 carries one id per row in ``Arg.ids``; inputs
    ``1..n`` are the candidates, all of one shape. Where Paddle's layer builds a schedule of block
    copies (one per run of equal ids), this layer gathers the rows of each candidate at once
    (one index array per candidate, found in forward and reused in backward), so the work is a
    few array operations whatever the pattern of ids. Gradients go back only to the chosen
    rows of the chosen candidate.

    Args:
        act: activation applied to the output.
        name: layer name.

    Shape:
        - Input 0: ``ids`` of shape ``(N,)`` (or ``(N, 1)``), integers in ``[0, n)``.
        - Inputs 1..n: ``(N, *)``, all the same shape.
        - Output: ``(N, *)``; sequence offsets pass through from input 1.
    """

    num_inputs = (2, None)

    def __init__(
        self, act: str | ActivationFunction | None = None, *, name: str | None = None
    ) -> None:
        super().__init__(act=act, name=name)

    def id_range(self, index: int, count: int) -> tuple[int, int] | None:
        """Input 0 chooses among the ``count - 1`` candidates after it (none where it is wired
        without one: its forward names that)."""
        return (0, count - 1) if index == 0 and count > 1 else None

    def _ids(self, sel: Arg, candidates: tuple[Arg, ...]) -> Any:
        if sel.ids is None:
            raise self.fail("input 0 must carry the row choices in Arg.ids, got ids=None")
        for i, c in enumerate(candidates, start=1):
            if c.value is None or c.value.ndim < 1:  # Arg.shape would fail on either
                got = "no value (ids only?)" if c.value is None else "a 0-d value"
                raise self.fail(f"input {i} must hold rows (N, *), got {got}")
            values_of(self, c)  # integer rows: an activation truncated them (sigmoid to 0)
        shape = candidates[0].shape
        for i, c in enumerate(candidates, start=1):
            if c.shape != shape:
                raise self.fail(
                    f"inputs must share one shape: input 1 is {shape}, input {i} {c.shape}"
                )
        xp = get_array_module(candidates[0].value)
        ids = xp.asarray(sel.ids)
        if ids.dtype.kind not in "iu" or ids.size != shape[0] or ids.ndim > 2:
            raise self.fail(
                f"input 0 needs one integer id per row ({shape[0]} rows), got ids of shape "
                f"{tuple(ids.shape)} dtype {ids.dtype}"
            )
        ids = ids.reshape(-1)
        n = len(candidates)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
            raise self.fail(
                f"ids must lie in [0, {n}) for {n} candidate inputs, got range "
                f"[{int(ids.min())}, {int(ids.max())}]"
            )
        return ids

    def _forward(self, sel: Arg, *candidates: Arg) -> Any:
        ids = self._ids(sel, candidates)
        xp = get_array_module(ids)
        # The copy schedule as index arrays: rows[i] are the rows taken from candidate i.
        self._rows = [xp.flatnonzero(ids == i) for i in range(len(candidates))]
        first = candidates[0].value
        y = xp.empty_like(first, dtype=xp.result_type(*(c.value for c in candidates)))
        for c, rows in zip(candidates, self._rows):
            y[rows] = c.value[rows]
        return y

    def make_output(self, y: Any, inputs: tuple[Arg, ...]) -> Arg:
        return Arg(y, seq_starts=inputs[1].seq_starts)

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        for c, rows in zip(self.inputs[1:], self._rows):
            dx = grad_target(c)
            if dx is not None and len(rows):
                dx[rows] += dz[rows]
