"""Reshape: each sample's features viewed in another shape, flat rows to images and back.

The catalogue's flat outputs (a ``Mixed`` or ``Concatenate2`` of conv projections and
operators, ``FeatureMapExpand``) are rows ``(N, C*H*W)``, as Paddle's; pooling and convolution
layers read images ``(N, C, *spatial)``. :class:`Reshape` goes between the two.
"""

from __future__ import annotations

from typing import Any

from distconv.arg import Arg
from distconv.kernels.shape import is_int, volume
from distconv.layers.base import Layer, size_arg
from distconv.layers.inputs import grad_target, values_of
from distconv.layers.options import checked_arguments
from distconv.parameter import UpdateCallback


class Reshape(Layer):
    """``x.reshape(N, *shape)``: each sample's features in ``shape``, the batch axis kept.

    ``Reshape(C, H, W)`` turns the flattened rows of a ``Mixed[ConvProjection]`` into the
    images a ``MaxPool2D`` or ``Conv2D`` reads; ``Reshape(C * H * W)`` flattens images into
    rows. Nothing is copied or reordered (C order, as the conv projections flatten): backward
    adds the output's gradient, reshaped back, into the input's.

    Args:
        *shape: the shape of one sample, ints >= 1 (or one tuple of them); their product must
            be the input's features per sample. The batch axis is kept, not given, and no
            size is inferred (no -1).
        name: layer name.

    Shape:
        - Input: ``(N, *)`` with ``prod(shape)`` elements per sample.
        - Output: ``(N, *shape)``; sequence offsets pass through.

    Raises:
        LayerError: no shape or a size that is not an int >= 1 (when built); an input whose
            features per sample differ from ``prod(shape)`` (in forward, naming both sizes),
            or ids (an integer feed), which it does not reshape.
        TypeError: a keyword it does not take (``nam=``, ``shape=``), naming Reshape and the
            way out, before anything is built.
    """

    @checked_arguments  # a misspelt name=, or shape=, is named with the way out
    def __init__(self, *shape: int, name: str | None = None) -> None:
        super().__init__(name=name)
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):  # Reshape((C, H, W)), numpy's
            shape = tuple(shape[0])
        if not shape:
            raise self.fail("needs the shape of one sample, e.g. Reshape(C, H, W)")
        for i, n in enumerate(shape):
            if is_int(n) and n == -1:  # PyTorch's x.view(-1, C, H, W)
                raise self.fail(
                    f"shape[{i}]=-1: no size is inferred; give one sample's sizes, the batch "
                    "axis is kept (Reshape(C, H, W), not Reshape(-1, C, H, W))"
                )
        self.shape = tuple(size_arg(self, f"shape[{i}]", n) for i, n in enumerate(shape))

    def settings(self) -> dict[str, Any]:
        """:meth:`Layer.settings`, and the shape, which no parameter shows."""
        return super().settings() | {"shape": list(self.shape)}

    def _forward(self, x: Arg) -> Any:
        # ids: values_of would advise a cast to float, which no reader of ids takes
        if x.value is None and x.ids is not None:
            raise self.fail(
                f"reshapes values, not ids (got {x.ids.dtype} ids): give the feed the shape the "
                "layer that reads its ids takes in the data set itself"
            )
        v = values_of(self, x)
        if v.ndim < 1:
            raise self.fail(f"expected an input of shape (N, *), got shape {tuple(v.shape)}")
        features, wanted = volume(v.shape[1:]), volume(self.shape)
        if features != wanted:
            raise self.fail(
                f"shape {self.shape} holds {wanted} features per sample, but the input has "
                f"{features} (input shape {tuple(v.shape)}){self._batch_hint(v.shape)}"
            )
        # a view: no layer writes into its input (check_network_grad refuses one that does)
        return v.reshape(v.shape[0], *self.shape)

    def _batch_hint(self, got: tuple[int, ...]) -> str:
        """Where the shape given is the whole batch's (N first), one sample's; else ""."""
        rest = self.shape[1:]
        if not rest or self.shape[0] != got[0] or volume(rest) != volume(got[1:]):
            return ""
        return f"; shape is one sample's, the batch axis kept: Reshape({', '.join(map(str, rest))})"

    def _backward(self, dz: Any, callback: UpdateCallback) -> None:
        # added into the input's own buffer, not handed over as it (add_grad): dz is this
        # layer's output gradient, and another reader of the input adding its share later
        # would write into it through the view
        dx = grad_target(self.inputs[0])
        if dx is not None:
            dx += dz.reshape(dx.shape)

    def __repr__(self) -> str:
        return f"{self.label}{self.shape}"


def reshape_hint(got: tuple[int, ...], nd: int, in_channels: int | None = None) -> str:
    """What a layer reading ``(N, C, *spatial)`` over ``nd`` axes adds to its refusal of an
    input of shape ``got``: 2-D flattened rows (a feed of flat images, a Mixed or
    FeatureMapExpand output) are reshaped to images (:class:`Reshape`); an input one axis short
    is one sample without its batch axis (``x[None]``, what inference most often feeds) or images
    without their channel axis (``Reshape(1, ...)``, a layer of the model). Each of those two is
    said only where its fix would give the layer its ``in_channels`` (None: unknown, as a
    pooling layer's, so both are said): a 3-channel model is not told to add a channel axis of
    one. "" for any other shape (a 2-D layer fed volumes is the wrong layer)."""
    axes = "C, D, H, W" if nd == 3 else "C, H, W"
    if len(got) == 2:
        return (
            f"; 2-D input is flattened rows (a feed of flat images, a Mixed or FeatureMapExpand "
            f"output): reshape it to (N, {axes}) first (Reshape({axes}))"
        )
    if len(got) != 1 + nd:
        return ""
    sizes = tuple(int(n) for n in got)
    hints = []
    if in_channels is None or sizes[0] == in_channels:  # x[None] makes got[0] the channels
        batched = (1, *sizes)
        hints.append(f"one sample without its batch axis? x[None] gives it one, shape {batched}")
    if in_channels is None or in_channels == 1:  # Reshape(1, ...) makes one channel
        spatial = ", ".join(map(str, sizes[1:]))
        hints.append(f"images with no channel axis? Reshape(1, {spatial}) gives them one")
    return "".join(f"; {hint}" for hint in hints)
