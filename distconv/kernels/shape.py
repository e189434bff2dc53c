"""Shape arithmetic shared by every convolution and pooling, 2-D and 3-D alike.

:class:`ConvGeometry` is a kernel's reach (size, stride, padding, dilation, groups);
:class:`ConvSpec` adds channels and direction: the one place conv layers, projections and
operators check their arguments and derive weight shapes and output sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: an int for every spatial axis alike, or one value per axis
IntOrTuple = int | Sequence[int]


def volume(shape: Sequence[int]) -> int:
    """The number of elements of an array of ``shape`` (1 for ``()``)."""
    v = 1
    for n in shape:
        v *= int(n)
    return v


def is_int(value: object) -> bool:
    """Whether ``value`` is an integer, Python's or numpy's; a bool is none (``True`` as a
    kernel size built a 1x1 convolution)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


#: what a padding of the wrong length is told: two values per axis were taken for per-side
#: padding (before and after, as PyTorch's F.pad), which nothing here does
PER_SIDE_PADDING = (
    "per-side padding is not supported: pad the input yourself (np.pad on the arrays you "
    "feed) and give padding 0"
)


def as_tuple(
    value: int | Sequence[int], nd: int, name: str, *, each: str = "", doubled: str = ""
) -> tuple[int, ...]:
    """``value`` repeated ``nd`` times if it is an int, else checked to have ``nd`` entries.

    Args:
        each: what each value is, told with "one per spatial axis" where the count is wrong.
        doubled: what ``2 * nd`` values (before and after each axis) are told.
    """
    if is_int(value):
        return (int(value),) * nd
    if not isinstance(value, Sequence) or not all(is_int(v) for v in value):
        raise ValueError(f"{name} must be an int or {nd} ints, got {value!r}")
    t = tuple(int(v) for v in value)
    if len(t) != nd:
        raise ValueError(
            f"{name} needs {nd} values (one per spatial axis{each}), got {tuple(value)}"
            + (f": {doubled}" if doubled and len(t) == 2 * nd else "")
        )
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
        if not is_int(groups):
            raise ValueError(f"groups must be an int, got {groups!r}")
        g = cls(
            as_tuple(ksize, nd, "kernel_size"),
            as_tuple(stride, nd, "stride"),
            as_tuple(pad, nd, "padding", each=", for both its sides", doubled=PER_SIDE_PADDING),
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


@dataclass(frozen=True)
class ConvSpec:
    """One convolution's channels, geometry and direction: what every conv layer checks.

    :class:`~distconv.layers.conv.ConvNd`, the convolution projections and
    :class:`~distconv.layers.operator.ConvOperator` all build one with :meth:`make`, which
    checks the channels against the groups and the output padding against the direction, and
    read from it the weight shape, the initialiser's fans and the output size.

    Attributes:
        in_channels: ``C``.
        out_channels: ``O``.
        geom: kernel, stride, padding, dilation, groups.
        transposed: a transposed convolution (the adjoint of a convolution).
        output_padding: (transposed only) extra size on one side of the output, per axis.
        input_size: the spatial input size when it is fixed at construction, else None.
    """

    in_channels: int
    out_channels: int
    geom: ConvGeometry
    transposed: bool = False
    output_padding: tuple[int, ...] = ()
    input_size: tuple[int, ...] | None = None

    @classmethod
    def make(
        cls,
        conv: tuple,
        *,
        nd: int | None = None,
        input_size: IntOrTuple | None = None,
        transposed: bool = False,
        output_padding: IntOrTuple = 0,
    ) -> ConvSpec:
        """Normalise and check the arguments of a convolution.

        Args:
            conv: the layer's own arguments, in PyTorch's order: ``(in_channels, out_channels,
                kernel_size, stride, padding, dilation, groups)``.
            nd: spatial axes; by default those of ``input_size`` (2 for an int).
            input_size: fix the spatial input size (a projection's image, an unshared bias);
                the output size is then checked to be positive here.
            transposed: a transposed convolution.
            output_padding: (transposed only) extra output size, per axis or for all.

        Raises:
            ValueError: naming the argument that is out of range.
        """
        in_channels, out_channels, kernel_size, stride, padding, dilation, groups = conv
        if nd is None:
            nd = len(input_size) if isinstance(input_size, Sequence) else 2  # numpy's ints too
        geom = ConvGeometry.make(nd, kernel_size, stride, padding, dilation, groups)
        for what, c in (("in_channels", in_channels), ("out_channels", out_channels)):
            if not is_int(c):
                raise ValueError(f"{what} must be an int, got {c!r}")
            if c < 1 or c % geom.groups:
                raise ValueError(f"{what}={c} must be a positive multiple of groups={geom.groups}")
        op = as_tuple(output_padding, nd, "output_padding")
        geom.check_output_padding(op, transposed)
        size = None if input_size is None else as_tuple(input_size, nd, "input_size")
        spec = cls(int(in_channels), int(out_channels), geom, transposed, op, size)
        if size is not None:
            spec.out_size(size)
        return spec

    @property
    def weight_shape(self) -> tuple[int, ...]:
        """``(O, C/groups, *k)``, or ``(C, O/groups, *k)`` transposed (PyTorch's layouts)."""
        g, k = self.geom.groups, self.geom.ksize
        if self.transposed:
            return (self.in_channels, self.out_channels // g, *k)
        return (self.out_channels, self.in_channels // g, *k)

    @property
    def fans(self) -> tuple[int, int]:
        """``(fan_in, fan_out)`` of the weight, for the initialiser."""
        shape, kv = self.weight_shape, self.geom.kernel_volume
        return shape[1] * kv, shape[0] * kv

    def out_size(self, in_size: Sequence[int]) -> tuple[int, ...]:
        """Spatial output size for a spatial input size.

        Raises:
            ValueError: the output would be empty (the kernel does not fit).
        """
        g = self.geom
        if self.transposed:
            if min(in_size) < 1:  # padding is not what empties it
                raise ValueError(f"a transposed convolution of an empty input {tuple(in_size)}")
            out = g.transpose_out_size(in_size, self.output_padding)
            if min(out) < 1:  # the kernel never shrinks a transposed output: the padding did
                raise ValueError(
                    f"padding {g.pad} crops away the whole output {out} of a transposed "
                    f"convolution of input {tuple(in_size)} (kernel {g.ksize}, stride "
                    f"{g.stride}, dilation {g.dilation}, output_padding {self.output_padding})"
                )
            return out
        out = g.out_size(in_size)
        if min(out) < 1:
            raise ValueError(
                f"kernel {g.ksize} (dilation {g.dilation}) is larger than the input "
                f"{tuple(in_size)} padded by {g.pad}"
            )
        return out

    @property
    def output_size(self) -> tuple[int, ...]:
        """The spatial output size for the fixed ``input_size``."""
        if self.input_size is None:
            raise ValueError("this convolution was built without input_size")
        return self.out_size(self.input_size)

    def flat_widths(self) -> tuple[int, int]:
        """Input and output elements per sample, ``C*prod(input_size)`` and ``O*prod(out)``."""
        return (
            self.in_channels * volume(self.input_size),
            self.out_channels * volume(self.output_size),
        )

    def describe(self) -> str:
        """``kernel=..., stride=..., pad=..., dilation=..., groups=...`` for a layer's repr."""
        g = self.geom
        return (
            f"kernel={g.ksize}, stride={g.stride}, pad={g.pad}, dilation={g.dilation}, "
            f"groups={g.groups}"
        )
