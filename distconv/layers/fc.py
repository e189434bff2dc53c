"""Fully connected layer: ``y = sum_i x_i W_i^T + b`` with PyTorch's ``(out, in)`` layout."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from distconv.arg import Arg
from distconv.backend import is_float_dtype
from distconv.init import Initializer
from distconv.kernels.activation import ActivationFunction
from distconv.kernels.bias import add_bias, row_sums
from distconv.kernels.parallel import matmul
from distconv.kernels.shape import is_int
from distconv.layers.base import Layer
from distconv.layers.inputs import add_grad
from distconv.layers.options import checked_arguments, options_problem
from distconv.parameter import Parameter, UpdateCallback


class FullyConnected(Layer):
    """``y = x W^T + b``; with several inputs ``y = sum_i x_i W_i^T + b``, each its own weight.

    Paddle's ``FullyConnectedLayer``: every input has its own weight and the products are
    summed (one shared bias). Inputs of more than two axes are flattened per sample.

    Args:
        in_features: features per sample (``C*H*W`` for an image input); a sequence of them,
            one per input, for several inputs.
        out_features: outputs per sample.
        bias: whether to add a bias.
        act: activation applied to the output.
        init: weight initialiser name.
        dtype: parameter dtype.
        weight: share an existing ``(out, in)`` weight Parameter; with several inputs, a
            sequence with one Parameter (or None, for a new one) per input.
        name: layer name.
        **options: a subclass's own options (see :meth:`_configure`).

    Shape:
        - Input ``i``: ``(N, in_features[i])`` or ``(N, *)`` with that many elements per sample.
        - Output: ``(N, out_features)``; sequence offsets pass through from input 0.

    Attributes:
        weights: one ``(out_features, in_features[i])`` Parameter per input, named ``weight``
            for a single input and ``weight0``, ``weight1``, ... for several.
        weight: ``weights[0]``.
        bias: ``(out_features,)`` or None.
        in_widths: features per sample of each input.
    """

    owns_preactivation = True  # a fresh product; the activation may run in place

    @checked_arguments  # a wrong count or keyword counts what the user passed, not self
    def __init__(
        self,
        in_features: int | Sequence[int],
        out_features: int,
        bias: bool = True,
        act: str | ActivationFunction | None = None,
        *,
        init: str | Initializer = "msra",
        dtype: Any = np.float32,
        weight: Parameter | Sequence[Parameter | None] | None = None,
        name: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(act=act, name=name)
        self._check_options(options)
        single = is_int(in_features)
        widths = [in_features] if single else in_features
        if isinstance(widths, np.ndarray):  # widths read from arrays' shapes, as before
            widths = widths.tolist()
        if not (
            isinstance(widths, Sequence)
            and widths
            and all(is_int(w) and w >= 1 for w in widths)
            and is_int(out_features)
            and out_features >= 1
        ):
            raise self.fail(
                f"in_features={in_features!r}, out_features={out_features!r} must be ints >= 1 "
                "(in_features: one, or one per input)"
            )
        self.in_widths = tuple(int(w) for w in widths)
        self.in_features, self.out_features = in_features, out_features
        self.num_inputs = len(self.in_widths)
        k = len(self.in_widths)
        if single or weight is None:
            shared = [weight] * k
        else:
            shared = [weight] if isinstance(weight, Parameter) else list(weight)
        if len(shared) != k:
            raise self.fail(f"weight= needs one entry per input ({k}), got {len(shared)}")
        self.weights = [
            self.make_weight(
                "weight" if single else f"weight{i}",
                (out_features, width),
                init=init,
                fan_in=width,
                fan_out=out_features,
                dtype=dtype,
                shared=w,
            )
            for i, (width, w) in enumerate(zip(self.in_widths, shared))
        ]
        self.weight = self.weights[0]
        self.bias = self.make_bias("bias", (out_features,), dtype) if bias else None
        self._configure(**options)

    def _check_options(self, options: dict[str, Any]) -> None:
        """Refuse unknown options before any weight is drawn (a failed constructor must not
        move the seeded generator)."""
        if problem := options_problem(self._configure, **options):
            raise TypeError(f"{self.label}: {problem}")

    def _configure(self) -> None:
        """Take a subclass's own keyword options (none here: an unknown one is a TypeError)."""

    def _flat(self, x: Arg, i: int = 0) -> Any:
        """Input ``i``'s value as ``(N, in_widths[i])`` rows."""
        v, width = x.value, self.in_widths[i]
        n = v.shape[0] if v is not None and v.ndim else 0
        if v is None or v.ndim < 2 or v.size != n * width:
            which = f"input {i}: " if len(self.in_widths) > 1 else ""
            raise self.fail(f"{which}expected {width} features per sample, got {self._got(x)}")
        if not is_float_dtype(v.dtype):  # an integer product would train in int or float64
            which = f"input {i} " if len(self.in_widths) > 1 else "input "
            raise self.fail(f"{which}holds {v.dtype} values; cast it to a float type first")
        return v.reshape(n, width)

    def _flats(self, inputs: Sequence[Arg]) -> list[Any]:
        """Each data input as rows (:meth:`_flat`), checked to have one number of rows."""
        xs = [self._flat(x, i) for i, x in enumerate(inputs)]
        rows = [x.shape[0] for x in xs]
        if len(set(rows)) > 1:
            raise self.fail(f"inputs have different numbers of rows: {rows}")
        return xs

    def _forward(self, *inputs: Arg) -> Any:
        y = None
        for x, w in zip(self._flats(inputs), self.weights):
            p = matmul(x, w.value.T)
            y = p if y is None else y + p
        return y if self.bias is None else add_bias(y, self.bias.value)

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        if self.bias is not None and not self.bias.static:
            self.bias.grad += row_sums(dz)
            self.bias.inc_update(callback)
        for i, (x, w) in enumerate(zip(self.inputs, self.weights)):
            if x.needs_grad:  # before inc_update: the callback may change the weight
                add_grad(x, matmul(dz, w.value).reshape(x.value.shape))
            if not w.static:
                w.grad += matmul(dz.T, self._flat(x, i))
            w.inc_update(callback)

    def _got(self, x: Arg) -> str:
        """What the layer was fed instead of ``(N, width)`` values (a subclass that reads ids
        as an input of its own says where they belong)."""
        if x.value is not None:
            return f"input shape {tuple(x.value.shape)}"
        if x.ids is not None:  # the Trainer feeds integer and bool arrays as ids (labels, lookups)
            kind = "a bool" if x.ids.dtype.kind == "b" else "an integer"
            return f"{kind.split()[1]} ids ({kind} array is fed as ids: cast it to a float type)"
        return "no values"
