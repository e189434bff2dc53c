"""The pieces a layer is built from: :class:`LayerPart` and the :class:`Projection` base.

A projection is Paddle's ``Projection``. It never owns an output: ``forward(input, out)`` *adds*
its result into the array it is handed (the whole output of a
:class:`~distconv.layers.mixed.Mixed` layer, or one column slice of a
:class:`~distconv.layers.concat.Concatenate2`), and ``backward(input, dout, callback)`` adds into
the input's gradient and its parameter's gradient, then calls ``inc_update``. The input gradient is
computed before ``inc_update`` because the callback may change the weight (a local optimizer
step), exactly as Paddle's projections order it.

A projection is built free-standing with its sizes. Its parameter is created when a layer adopts
it with :meth:`LayerPart.attach`: through the layer's ``new_param`` (or ``add_param`` for a shared
weight), so the parameter is named ``"<layer>.<key>.weight"``, counts the layer as one user, is
listed by the layer's ``parameters()`` and follows the layer's renames.

Inputs are read as rows: ``(N, width)``, or ``(N, *)`` flattened per sample, as Paddle's matrices.
The families live in their own modules: :mod:`~distconv.layers.projection` (matrix, table,
element-wise, slice), :mod:`~distconv.layers.context` (the context window) and
:mod:`~distconv.layers.conv` (convolutions, next to the conv layers); operators in
:mod:`~distconv.layers.operator`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import get_array_module, is_float_dtype
from distconv.init import Initializer
from distconv.kernels.shape import volume
from distconv.layers.base import (
    Layer,
    LayerError,
    LayerTypeError,
    checked_shared,
    named,
    size_arg,
    told,
)
from distconv.layers.inputs import grad_target
from distconv.parameter import Parameter, UpdateCallback


# -- what projections and operators share --------------------------------------------------------
class LayerPart:
    """A piece of a layer (a projection or an operator): its owner, its key, errors, input rows.

    Attributes:
        owner: the layer that adopted this part (None until :meth:`attach`).
        key: the part's key in that layer (``"proj0"``, ``"op1"``).
    """

    #: whether it reads integer values that need no gradient (a 0/1 mask): a part whose columns
    #: copy its input's values (a convolution, a context window's padding) reads float ones only,
    #: as an integer image would set the dtype it computes in (result_type(input, weight))
    takes_integer_values = True

    def __init__(self) -> None:
        self.owner: Layer | None = None
        self.key: str | None = None

    def attach(self, owner: Layer, key: str) -> None:
        """Adopt this part into ``owner`` under ``key`` (and create its parameters there).

        Raises:
            LayerError: the part already serves a layer (it keeps per-batch state, so it can't
                serve two).
        """
        if self.owner is not None:
            raise self.fail(
                f"already attached to {self.owner.label} as {self.key!r}; "
                "build a new one for each layer (share weights with weight=)"
            )
        self.owner, self.key = owner, key
        self._make_params()

    def detach(self) -> None:
        """Undo :meth:`attach`: the layer that adopted this part failed to build, so the part
        (and a weight made for it) belongs to no layer and may be adopted again."""
        self.owner = self.key = None

    def _make_params(self) -> None:
        """Create parameters in the owner; none by default."""

    @property
    def label(self) -> str:
        """Type and key, as error messages show the part: ``TableProjection 'proj0'``."""
        cls, key = type(self).__name__, getattr(self, "key", None)
        return cls if key is None else f"{cls} {key!r}"

    def fail(self, message: str) -> LayerError:
        """A LayerError naming the owning layer (once attached) and this part."""
        if getattr(self, "owner", None) is None:
            return LayerError(f"{self.label}: {message}")
        return self.owner.fail(f"{self.label}: {message}")

    def _rows(self, arg: Arg, width: int | None, what: str = "input") -> Any:
        """``arg.value`` as ``(N, width)`` rows (``width=None``: whatever it has per sample)."""
        v = arg.value
        if v is None:
            raise self.fail(f"the {what} carries no value (ids only?)")
        # float gradients would not add into integer ones; without a gradient (a mask) they
        # are read as numbers, as before, by the parts that compute in the output's dtype
        if not is_float_dtype(v.dtype) and (arg.needs_grad or not self.takes_integer_values):
            message = str(self.fail(f"expected float values in the {what}, got {v.dtype} values"))
            hint = " or pass them with needs_grad=False" if self.takes_integer_values else ""
            raise LayerTypeError(
                f"{message} (cast them to a float type, as x.astype(np.float32){hint})"
            )
        n = int(v.shape[0]) if v.ndim else 0
        if v.ndim < 2 or (width is not None and v.size != n * width):
            want = "rows" if width is None else f"{width} columns per row"
            raise self.fail(f"expected {what} of {want}, got shape {tuple(v.shape)}")
        return v.reshape(n, -1 if width is None else width)  # -1 cannot size an empty batch

    @staticmethod
    def _grad_rows(arg: Arg) -> Any:
        """The gradient buffer of ``arg`` as an ``(N, width)`` view, or None if it wants none.

        The view must share memory with the buffer for ``+=`` to land, so a non-contiguous
        buffer is first replaced by a contiguous copy.
        """
        buf = grad_target(arg)
        if buf is None:
            return None
        if not buf.flags.c_contiguous:
            arg.grad = buf = get_array_module(buf).ascontiguousarray(buf)
        return buf.reshape(buf.shape[0], volume(buf.shape[1:]))  # -1 fails on an empty batch


# -- the projection base -------------------------------------------------------------------------
@dataclass(frozen=True)
class WeightSpec:
    """A projection's parameter, made when a layer adopts the projection.

    Attributes:
        shape: the parameter's shape; None for a projection without one.
        fans: ``(fan_in, fan_out)`` for the initialiser.
        init: initialiser name or function.
        dtype: parameter dtype.
        shared: an existing Parameter to share instead of making one (its shape must match).
    """

    shape: tuple[int, ...] | None
    fans: tuple[int, int] = (1, 1)
    init: str | Initializer = "msra"
    dtype: Any = np.float32
    shared: Parameter | None = None


class Projection(LayerPart):
    """Base of all projections: sizes, at most one parameter, and the backward order.

    Subclasses implement :meth:`forward` (add into ``out``) and :meth:`_backward` (add into the
    input's and the weight's gradients); :meth:`backward` then calls ``inc_update``.

    Args:
        in_width: columns of the input (None for a projection that reads ``Arg.ids``).
        out_width: columns it writes.
        weight: its parameter, or None for a projection without one.

    Attributes:
        weight: the Parameter once attached (a shared one from the start), None for a
            projection without one; reading it before then raises a LayerError.
    """

    def __init__(
        self, in_width: int | None, out_width: int, weight: WeightSpec | None = None
    ) -> None:
        super().__init__()
        in_width = None if in_width is None else size_arg(self, "in_width", in_width)
        out_width = None if out_width is None else size_arg(self, "out_width", out_width)
        spec = weight or WeightSpec(None)
        if spec.shared is not None:
            checked_shared(self, "weight", spec.shared, spec.shape)
        self.in_width, self.out_width = in_width, out_width
        self._weight_spec = spec
        self._weight: Parameter | None = None

    @property
    def weight(self) -> Parameter | None:
        """The Parameter once a layer adopted this projection (one shared with ``weight=``:
        that one from the start); None for one without a weight.

        Raises:
            LayerError: read before a layer adopted it, when it will make its own: the weight
                does not exist yet. ``FullMatrixProjection(w, v, weight=table.weight)`` built
                before ``table``'s layer got None, which means "a new weight", so the two were
                silently not tied.
        """
        spec = self._weight_spec
        if self._weight is None and self.owner is None and spec.shape is not None:
            if spec.shared is not None:  # tied already: chaining a tie through it is fine
                return spec.shared
            raise self.fail(
                "its weight is made when a layer adopts it (Mixed([...]), Concatenate2([...])); "
                "build that layer before reading or sharing the weight"
            )
        return self._weight

    @weight.setter
    def weight(self, value: Parameter | None) -> None:
        self._weight = value

    def detach(self) -> None:
        super().detach()
        self._weight = None

    def _make_params(self) -> None:
        spec = self._weight_spec
        if spec.shape is None:
            return
        fan_in, fan_out = spec.fans
        self.weight = self.owner.make_weight(
            f"{self.key}.weight",
            spec.shape,
            init=spec.init,
            fan_in=fan_in,
            fan_out=fan_out,
            dtype=spec.dtype,
            shared=spec.shared,
        )

    def rows_read(self, input: Arg | None) -> Any:
        """The rows of the weight a forward on ``input`` (None: computed by a layer) reads:
        all of them, unless a projection that reads ids narrows it."""
        return self.weight.all_rows()

    def id_range(self) -> tuple[int, int] | None:
        """The ids its input must hold, as ``(low, high)``: ``low <= id < high``; None (the
        default) where it reads values. Its layer answers with it for that input
        (:meth:`~distconv.layers.base.Layer.id_range`), and a fit checks a feed of them before
        its first step."""
        return None

    @property
    def needs_weight_grad(self) -> bool:
        return self.weight is not None and not self.weight.static

    def forward(self, input: Arg, out: Any) -> None:
        """Add this projection of ``input`` into ``out`` ``(N, out_width)`` (in place); a
        subclass writes it."""
        raise NotImplementedError(str(self.fail("has no forward(input, out) of its own")))

    def backward(self, input: Arg, dout: Any, callback: UpdateCallback) -> None:
        """Add gradients into ``input`` and the weight from ``dout``; then ``inc_update``.

        Raises:
            LayerError: naming the layer and this projection, for a ValueError from
                :meth:`_backward` (numpy's, in one of one's own), which it chains; the
                callback's own errors pass as they are.
        """
        try:
            self._backward(input, dout)
        except LayerError:
            raise
        except ValueError as exc:  # "Mixed 'm': backward: operands ..." named not the part
            raise named(self.fail(f"backward: {told(exc)}"), exc) from exc
        if self.weight is not None:
            self.weight.inc_update(callback)

    def _backward(self, input: Arg, dout: Any) -> None:
        """Add the gradients from ``dout`` into ``input`` and the weight (unless static); a
        subclass writes it, and :meth:`backward` fires the weight's ``inc_update``."""
        raise NotImplementedError(str(self.fail("has no _backward(input, dout) of its own")))

    def __repr__(self) -> str:
        return f"{self.label}({self.in_width} -> {self.out_width})"
