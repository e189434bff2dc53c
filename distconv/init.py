"""Weight initialisers: MSRA (He), Xavier (Glorot), normal, zero, ones, unit normal.

Values are drawn on the host from one seeded generator, in the order layers are built, then moved
to the current device; :func:`set_seed` makes a whole model reproducible.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from distconv.backend import is_float_dtype, resolve_dtype, to_device
from distconv.sampler import check_seed

_rng = np.random.default_rng(0)

Initializer = Callable[[tuple[int, ...], int, int, np.random.Generator], np.ndarray]


def set_seed(seed: int) -> None:
    """Reseed the generator every initialiser draws from.

    Raises:
        ValueError: ``seed`` is not an int >= 0 (numpy said "expected non-negative integer").
    """
    global _rng
    check_seed(seed, "the initialisers'")
    _rng = np.random.default_rng(seed)


def msra(shape: tuple[int, ...], fan_in: int, fan_out: int, rng: np.random.Generator) -> np.ndarray:
    """He et al. 2015: normal with std sqrt(2 / fan_in), for ReLU networks."""
    return rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)


def xavier(
    shape: tuple[int, ...], fan_in: int, fan_out: int, rng: np.random.Generator
) -> np.ndarray:
    """Glorot & Bengio 2010: uniform in +-sqrt(6 / (fan_in + fan_out))."""
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, shape)


def normal(
    shape: tuple[int, ...], fan_in: int, fan_out: int, rng: np.random.Generator
) -> np.ndarray:
    """Normal with std 0.01, independent of the fans."""
    return rng.standard_normal(shape) * 0.01


def zero(shape: tuple[int, ...], fan_in: int, fan_out: int, rng: np.random.Generator) -> np.ndarray:
    """All zeros: biases, and padding that starts as the untrained case."""
    return np.zeros(shape)


def ones(shape: tuple[int, ...], fan_in: int, fan_out: int, rng: np.random.Generator) -> np.ndarray:
    """All ones: an element-wise or scalar weight that starts as the identity."""
    return np.ones(shape)


def unit_normal(
    shape: tuple[int, ...], fan_in: int, fan_out: int, rng: np.random.Generator
) -> np.ndarray:
    """Standard normal, PyTorch's default for embedding tables."""
    return rng.standard_normal(shape)


INITIALIZERS: dict[str, Initializer] = {
    "msra": msra,
    "he": msra,
    "xavier": xavier,
    "glorot": xavier,
    "normal": normal,
    "zero": zero,
    "ones": ones,
    "unit_normal": unit_normal,
}


def initialize(
    method: str | Initializer,
    shape: tuple[int, ...],
    fan_in: int,
    fan_out: int,
    dtype: Any = np.float32,
) -> Any:
    """An array of ``shape`` drawn by ``method`` (a name or a function), on the current device.

    Raises:
        ValueError: ``method`` is an unknown name, neither a name nor a function, or a function
            that returned another shape (a layer's weight took that shape and failed far away,
            in its first product) or NaN or infinity (in ``dtype``).
    """
    if isinstance(method, str):
        try:
            method = INITIALIZERS[method]
        except KeyError:
            raise ValueError(
                f"unknown initialiser {method!r}; choose one of {sorted(INITIALIZERS)}"
            ) from None
    elif not callable(method):  # init=None was "'NoneType' object is not callable", unnamed
        raise ValueError(
            f"initialiser must be a name, one of {sorted(INITIALIZERS)}, or a function "
            f"f(shape, fan_in, fan_out, rng), got {method!r}"
        )
    drawn = method(tuple(shape), max(fan_in, 1), max(fan_out, 1), _rng)
    host = np.asarray(drawn, dtype=resolve_dtype(dtype))
    if host.shape != tuple(shape):
        name = getattr(method, "__name__", repr(method))
        raise ValueError(
            f"initialiser {name} returned an array of shape {host.shape}, not the "
            f"{tuple(shape)} it was asked for (it is called as f(shape, fan_in, fan_out, rng))"
        )
    if is_float_dtype(host.dtype) and not np.isfinite(host).all():
        # trained anyway: the first loss was NaN, said as "lower the learning rate or check
        # the data", neither of which was the cause
        name = getattr(method, "__name__", repr(method))
        bad = int(np.count_nonzero(~np.isfinite(host)))
        raise ValueError(
            f"initialiser {name} returned {bad} NaN or infinite value(s) of {host.size} in "
            f"{host.dtype} (a division by a fan of 0? a value past the dtype's range?)"
        )
    return to_device(host)
