"""Shape arithmetic shared by every convolution and pooling, 2-D and 3-D alike."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def volume(shape: Sequence[int]) -> int:
    """The number of elements of an array of ``shape`` (1 for ``()``)."""
    v = 1
    for n in shape:
        v *= int(n)
    return v


def as_tuple(value: int | Sequence[int], nd: int, name: str) -> tuple[int, ...]:
    """``value`` repeated ``nd`` times if it is an int, else checked to have ``nd`` entries."""
    if isinstance(value, (int, np.integer)):
        return (int(value),) * nd
    if not isinstance(value, Sequence) or not all(isinstance(v, (int, np.integer)) for v in value):
        raise ValueError(f"{name} must be an int or {nd} ints, got {value!r}")
    t = tuple(int(v) for v in value)
    if len(t) != nd:
        raise ValueError(f"{name} needs {nd} values (one per spatial axis), got {tuple(value)}")
    return t


def conv_output_size(size: int, k: int, s: int, p: int, d: int) -> int:
    """Output length of a convolution along one axis: ``(size + 2p - d(k-1) - 1) // s + 1``."""
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def conv_transpose_output_size(size: int, k: int, s: int, p: int, d: int, op: int = 0) -> int:
    """Output length of a transposed convolution: ``(size-1)s - 2p + d(k-1) + op + 1``."""
    return (size - 1) * s - 2 * p + d * (k - 1) + op + 1


@dataclass(frozen=True)
class ConvGeometry:
    """Kernel size, stride, padding and dilation per spatial axis, plus the group count.

    Everything im2col, col2im, convolution and pooling need besides the arrays themselves.
    """

    ksize: tuple[int, ...]
    stride: tuple[int, ...]
    pad: tuple[int, ...]
    dilation: tuple[int, ...]
    groups: int = 1

    @classmethod
    def make(
        cls,
        nd: int,
        ksize: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        pad: int | Sequence[int] = 0,
        dilation: int | Sequence[int] = 1,
        groups: int = 1,
    ) -> ConvGeometry:
        """Normalise per-axis arguments and check they are in range."""
        g = cls(
            as_tuple(ksize, nd, "kernel_size"),
            as_tuple(stride, nd, "stride"),
            as_tuple(pad, nd, "padding"),
            as_tuple(dilation, nd, "dilation"),
            int(groups),
        )
        for name, vals, low in (
            ("kernel_size", g.ksize, 1),
            ("stride", g.stride, 1),
            ("padding", g.pad, 0),
            ("dilation", g.dilation, 1),
            ("groups", (g.groups,), 1),
        ):
            if min(vals) < low:
                raise ValueError(f"{name} must be >= {low}, got {vals}")
        return g

    @property
    def nd(self) -> int:
        return len(self.ksize)

    @property
    def kernel_volume(self) -> int:
        """Elements in one kernel window: the product of ``ksize``."""
        return volume(self.ksize)

    def out_size(self, in_size: Sequence[int]) -> tuple[int, ...]:
        """Spatial output size of the convolution for a spatial input size."""
        return tuple(
            conv_output_size(n, k, s, p, d)
            for n, k, s, p, d in zip(in_size, self.ksize, self.stride, self.pad, self.dilation)
        )

    def transpose_out_size(
        self, in_size: Sequence[int], output_padding: Sequence[int] | None = None
    ) -> tuple[int, ...]:
        """Spatial output size of the transposed convolution."""
        op = output_padding or (0,) * self.nd
        return tuple(
            conv_transpose_output_size(n, k, s, p, d, o)
            for n, k, s, p, d, o in zip(
                in_size, self.ksize, self.stride, self.pad, self.dilation, op
            )
        )

    def check_output_padding(self, output_padding: tuple[int, ...], transposed: bool) -> None:
        """Output padding is for transposed convolutions only, and must lie in
        ``[0, max(stride, dilation))`` per axis, as in PyTorch: more would add rows no input
        pixel reaches."""
        if any(output_padding) and not transposed:
            raise ValueError("output_padding is only for transposed convolutions")
        for op, s, d in zip(output_padding, self.stride, self.dilation):
            if not 0 <= op < max(s, d):
                raise ValueError(
                    f"output_padding={tuple(output_padding)} must be >= 0 and smaller than "
                    f"stride {self.stride} or dilation {self.dilation} on each axis"
                )

    def padded_extent(self) -> tuple[int, ...]:
        """How far one kernel application reaches along each axis: ``d(k-1) + 1``."""
        return tuple(d * (k - 1) + 1 for k, d in zip(self.ksize, self.dilation))
