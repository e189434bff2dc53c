"""Activation functions (pure array code), used by every layer as its ``act`` option.

Each activation computes ``y = f(z)`` and, from the output alone, ``dz = f'(z) * dy``; keeping
only ``y`` is what lets a layer apply its activation in place of storing ``z``: a layer whose
``z`` is a fresh buffer of its own passes ``inplace=True`` and saves an output-sized temporary
(ReLU, sigmoid, tanh, softmax and linear honour it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distconv.backend import get_array_module, sum_dtype, widened


def _scratch(z: Any, zw: Any, inplace: bool) -> Any:
    """A buffer shaped as ``z`` to compute an activation in, in ``zw``'s (widened) type:
    ``zw`` itself where it is a copy (16-bit ``z``) or the caller gave ``z`` away
    (``inplace``), else a new one. Always an array, even for a 0-d ``z``, so that ``out=``
    takes it (a ufunc hands a 0-d result back as a scalar, and a 16-bit numpy scalar, a
    16-bit loss's value, widens to a scalar, which no ``out=`` takes)."""
    if (inplace or zw is not z) and not np.isscalar(zw):
        return zw
    return get_array_module(zw).empty_like(zw)


class ActivationFunction:
    """``forward(z) -> y`` and ``backward(y, dy) -> dz`` on arrays of any shape."""

    name = "base"

    def forward(self, z: Any, inplace: bool = False) -> Any:
        """``f(z)``; with ``inplace`` it may overwrite ``z`` (the caller owns it)."""
        raise NotImplementedError

    def backward(self, y: Any, dy: Any) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return self.name


class Linear(ActivationFunction):
    name = "linear"

    def forward(self, z: Any, inplace: bool = False) -> Any:
        return z

    def backward(self, y: Any, dy: Any) -> Any:
        return dy


class ReLU(ActivationFunction):
    name = "relu"

    def forward(self, z: Any, inplace: bool = False) -> Any:
        return get_array_module(z).maximum(z, 0, out=z if inplace else None)

    def backward(self, y: Any, dy: Any) -> Any:
        """``dy`` where the unit is on, +0.0 where it is off (``y <= 0``), as PyTorch's
        threshold_backward: a NaN unit passes its gradient on, and an inf in ``dy`` at a unit
        that is off gives 0 (``dy * (y > 0)`` made it inf * 0 = NaN, which spread to every
        gradient below).

        Chosen bitwise, ``dy``'s bits AND all ones (on) or all zeros (off), which is as fast
        as the product; ``xp.where`` took 7 times as long, and a 28x28 LeNet step a fifth
        longer. One expression with no temporary named, so numpy reuses each in place (a
        named mask took 5 times as long); ``y <= 0`` made an array, whose 0 - 1 wraps where a
        0-d y's numpy scalar warned of overflow; the result made an array, which numpy hands
        back as a scalar for a 0-d one.
        """
        xp = get_array_module(y)
        if not hasattr(dy, "view"):  # a number: Arg.grad takes one for a 0-d value
            dy = xp.asarray(dy, dtype=y.dtype)
        bits = dy.view(f"u{dy.itemsize}")
        return xp.asarray(
            (bits & (xp.asarray(y <= 0).astype(bits.dtype) - bits.dtype.type(1))).view(dy.dtype)
        )


class Sigmoid(ActivationFunction):
    name = "sigmoid"

    def forward(self, z: Any, inplace: bool = False) -> Any:
        """``1 / (1 + exp(-z))``, in four passes over one buffer.

        ``exp(-z)`` overflows to inf for very negative ``z`` (below -88 in float32), and
        ``1 / (1 + inf)`` is exactly the 0 that sigmoid rounds to there (a subnormal at most),
        so the overflow is silenced rather than avoided: the stable two-branch form
        (``where(z >= 0, 1 / (1 + e), e / (1 + e))`` over ``e = exp(-|z|)``) took 8 times
        as long, numpy's data-dependent ``where`` alone costing more than the rest. 16-bit
        ``z`` is widened first: float16's ``exp(-z)`` overflows already below -11.
        """
        xp = get_array_module(z)
        zw = widened(z)
        e = xp.negative(zw, out=_scratch(z, zw, inplace))
        with np.errstate(over="ignore"):  # cupy warns of nothing: numpy's setting suffices
            xp.exp(e, out=e)
        e += 1
        xp.divide(1, e, out=e)  # numpy's reciprocal, not vectorised, took twice as long
        return e.astype(z.dtype, copy=False)

    def backward(self, y: Any, dy: Any) -> Any:
        """``dy * y * (1 - y)`` with one temporary, in the type ``dy * y`` would have: for
        16-bit, taken in float32 and rounded once, as the forward (three 16-bit roundings
        were up to 2 ulps off, where PyTorch's bfloat16 gradient is correctly rounded)."""
        xp = get_array_module(y)
        dtype = xp.result_type(y, dy)
        g = xp.subtract(1, y, dtype=sum_dtype(dtype) or dtype)
        g *= y
        g *= dy
        return g.astype(dtype, copy=False)


class Tanh(ActivationFunction):
    name = "tanh"

    def forward(self, z: Any, inplace: bool = False) -> Any:
        return get_array_module(z).tanh(z, out=z if inplace else None)

    def backward(self, y: Any, dy: Any) -> Any:
        """``dy * (1 - y * y)``, in the type ``dy * y`` would have: for 16-bit, taken in
        float32 and rounded once, as sigmoid's. In 16 bits ``1 - y * y`` cancels where ``y``
        nears 1 or -1, and the gradient was up to 16 float16 ulps off (6 in bfloat16), where
        PyTorch's is correctly rounded in both."""
        xp = get_array_module(y)
        dtype = xp.result_type(y, dy)
        wide = sum_dtype(dtype)
        if wide is None:  # float32 and float64: the same three products as always
            return dy * (1 - y * y)
        g = 1 - xp.multiply(y, y, dtype=wide)  # a 16-bit square is exact in float32
        g *= dy
        return g.astype(dtype, copy=False)


class Softmax(ActivationFunction):
    """Softmax over axis 1 (the features of a row, or the channels of an image).

    A row that is ``-inf`` throughout has no softmax: it comes out NaN, as in PyTorch, where
    a row of probabilities summing to 0 would pass for an answer.
    """

    name = "softmax"

    def forward(self, z: Any, inplace: bool = False) -> Any:
        if z.ndim < 2:
            raise ValueError(f"softmax is over axis 1 and needs rows (N, C, ...), got {z.shape}")
        if z.shape[1] == 0:  # nothing to normalise (a selective layer's empty selection):
            return z  # its max below raised numpy's "zero-size array to reduction operation"
        xp = get_array_module(z)
        # 16-bit in float32: numpy sums bfloat16 in bfloat16, and over 4096 classes the
        # normaliser stopped at 256 (each probability 16 times too large)
        zw = widened(z)
        top = zw.max(axis=1, keepdims=True)
        # a row of -inf alone has no softmax: NaN, as PyTorch's, so that no one reads a row of
        # probabilities that sums to 0 (zeros hid float16 logits that overflowed to -inf). It is
        # made quietly, without numpy's 'invalid value' warning from the shift by -inf (the
        # selective layer turns its samples that select nothing into zeros itself)
        none = top == float("-inf")
        # one buffer, shifted, exponentiated and normalised in place: the row-sized ``where``s
        # are cheap, full-sized temporaries were most of the time. A +inf (or NaN) logit shifts
        # to inf - inf: its row is NaN, as PyTorch's, made as quietly as the row of -inf above;
        # a finite logit shifted past the type's range (1e308 below -1e308) is -inf, a 0
        with np.errstate(invalid="ignore", over="ignore"):
            e = xp.subtract(zw, xp.where(none, 0, top), out=_scratch(z, zw, inplace))
            xp.exp(e, out=e)
            e /= xp.where(none, float("nan"), e.sum(axis=1, keepdims=True))
        return e.astype(z.dtype, copy=False)

    def backward(self, y: Any, dy: Any) -> Any:
        products = dy * y
        dot = products.sum(axis=1, keepdims=True, dtype=sum_dtype(products.dtype))
        # into the products' buffer, which the sum is done with; 16-bit: float32 inside
        g = get_array_module(y).subtract(
            dy, dot, out=products if products.dtype == dot.dtype else None
        )
        g *= y
        return g.astype(products.dtype, copy=False)


ACTIVATIONS: dict[str, type[ActivationFunction]] = {
    cls.name: cls for cls in (Linear, ReLU, Sigmoid, Tanh, Softmax)
}


def get_activation(act: str | ActivationFunction | None) -> ActivationFunction:
    """An activation from its name (``None`` means linear) or the instance itself."""
    if act is None:
        return Linear()
    if isinstance(act, ActivationFunction):
        return act
    # a list or a dict (act=["relu"]) is no key at all: the lookup raised a bare TypeError
    cls = ACTIVATIONS.get(act) if isinstance(act, str) else None
    if cls is None:
        raise ValueError(f"unknown activation {act!r}; choose one of {sorted(ACTIVATIONS)}")
    return cls()
