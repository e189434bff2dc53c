"""The constructor every convolution shares: the conv layers, ``ConvProjection``, ``ConvOperator``.

All of them take PyTorch's arguments in PyTorch's order, ``(in_channels, out_channels,
kernel_size, stride, padding, dilation, groups)``, check them once into a
:class:`~distconv.kernels.shape.ConvSpec` and read every size from it. :class:`Convolution`
holds that signature; each kind builds what it owns in :meth:`Convolution._build` (a layer its
activation, weight and bias; a projection its weight; an operator its operands) and calls
:meth:`Convolution._make_spec` once it can name itself in an error.
"""

from __future__ import annotations

from typing import Any

from distconv.kernels.shape import ConvGeometry, ConvSpec, IntOrTuple
from distconv.layers.base import checked
from distconv.layers.options import (
    checked_arguments,
    options_problem,
    positional_names,
    too_many_positional,
)
from distconv.layers.part import LayerPart, Projection

#: the arguments every convolution takes first, positionally, in PyTorch's order
CONV_ARGUMENTS = (
    "in_channels",
    "out_channels",
    "kernel_size",
    "stride",
    "padding",
    "dilation",
    "groups",
)


class Convolution:
    """Mixin: the arguments of a convolution, checked into :attr:`spec`.

    Args:
        in_channels: channels of the input (``C``).
        out_channels: channels of the output (``O``).
        kernel_size, stride, padding, dilation: an int, or one value per spatial axis.
        groups: split input and output channels into this many independent groups.
        input_size: the spatial size of the input (required by the parts, which read flattened
            images; a layer needs it only for an unshared bias).
        output_padding: (transposed only) extra size added to one side of the output.
        *options, **keyword_options: what the kind builds, listed in its own docstring (a
            layer's ``bias`` and ``act`` may follow ``groups`` positionally, as before).

    Attributes:
        spec: the checked :class:`~distconv.kernels.shape.ConvSpec`.

    Raises:
        TypeError: an option the kind does not take (a typo, one positional too many, a
            part's ``bias=``), naming the class, before anything is built.
    """

    #: spatial axes; None takes them from ``input_size`` (2 for an int)
    nd: int | None = None
    #: a transposed convolution (the adjoint); set by subclasses
    transposed = False
    spec: ConvSpec

    @checked_arguments  # a wrong call names Conv2D, not this mixin
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntOrTuple,
        stride: IntOrTuple = 1,
        padding: IntOrTuple = 0,
        dilation: IntOrTuple = 1,
        groups: int = 1,
        *options: Any,
        input_size: IntOrTuple | None = None,
        output_padding: IntOrTuple = 0,
        **keyword_options: Any,
    ) -> None:
        self._arguments = (
            (in_channels, out_channels, kernel_size, stride, padding, dilation, groups),
            input_size,
            output_padding,
        )
        self._check_options(options, keyword_options)
        self._build(*options, **keyword_options)

    def _check_options(self, options: tuple[Any, ...], keyword_options: dict[str, Any]) -> None:
        """Refuse what :meth:`_build` does not take as a TypeError naming the class the user
        called, not the private method, with the way out where there is one."""
        problem = options_problem(self._build, *options, **keyword_options)
        if problem is None:
            return
        if "too many positional arguments" in problem:
            names = CONV_ARGUMENTS + positional_names(self._build)
            problem = too_many_positional(names, len(CONV_ARGUMENTS) + len(options))
        raise TypeError(f"{type(self).__name__}: {problem}{self._owners_option(problem)}")

    def _owners_option(self, problem: str) -> str:
        """Where a part's refused ``bias=`` or ``act=`` belongs (Paddle's projections take
        neither; the layer that adopts them does), or ""."""
        if not isinstance(self, LayerPart):
            return ""
        kind = "a projection" if isinstance(self, Projection) else "an operator"
        for key, what in (("bias", "bias"), ("act", "activation")):
            if f"argument {key!r}" in problem:
                return f" ({kind} has no {what}: give {key}= to the layer that adopts it)"
        return ""

    def _build(self, *options: Any, **keyword_options: Any) -> None:
        """Make what this kind owns; call :meth:`_make_spec` before reading any size."""
        raise NotImplementedError

    def _make_spec(self) -> ConvSpec:
        """Check the arguments; a ValueError is re-raised naming this layer or part."""
        conv, input_size, output_padding = self._arguments
        self.spec = checked(
            self,  # type: ignore[arg-type]  # every subclass is a Layer or a LayerPart
            ConvSpec.make,
            conv,
            nd=self.nd,
            input_size=input_size,
            transposed=self.transposed,
            output_padding=output_padding,
        )
        return self.spec

    @property
    def in_channels(self) -> int:
        return self.spec.in_channels

    @property
    def out_channels(self) -> int:
        return self.spec.out_channels

    @property
    def geom(self) -> ConvGeometry:
        return self.spec.geom

    @property
    def input_size(self) -> tuple[int, ...] | None:
        return self.spec.input_size

    @property
    def output_size(self) -> tuple[int, ...]:
        return self.spec.output_size

    def _conv_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, input={self.input_size}, "
            f"{self.spec.describe()}"
        )
