"""The arrays' checks every convolution and pooling kernel makes before it computes: images,
filters and an output gradient against the kernel's geometry (:class:`ConvGeometry`), so a
kernel called with arrays that do not fit fails naming them, not in a matrix product.
"""

from __future__ import annotations

from collections.abc import Sequence

from distconv.kernels.shape import ConvGeometry


def check_conv_shapes(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    geom: ConvGeometry,
    dy_shape: Sequence[int] | None = None,
    *,
    per_sample: bool = False,
    adjoint: bool = False,
) -> tuple[int, ...]:
    """Check a convolution's arrays against its geometry; return its spatial output size.

    The one check the convolution kernels share (:mod:`distconv.kernels.conv`,
    :mod:`distconv.kernels.conv_per_sample`): a kernel called with arrays that do not fit
    fails here, naming them, instead of in a matrix product's message or not at all.

    Args:
        x_shape: the images, ``(N, C, *spatial)``.
        w_shape: the filters, ``(O, C/groups, *k)``, or ``(N, O, C/groups, *k)`` per sample.
        geom: kernel, stride, padding, dilation, groups.
        dy_shape: an output-side array (an output gradient), ``(N, O, *out)``, or None.
        per_sample: a filter bank per sample.
        adjoint: ``dy_shape`` is what the adjoint reads (a transposed convolution's input),
            which an output padding of at least the stride leaves short of ``out``: any size
            whose transposed output size plus an output padding the geometry allows is the
            images' size fits.

    Raises:
        ValueError: naming the array that does not fit.
    """
    nd, groups = geom.nd, geom.groups
    x_shape, w_shape = tuple(x_shape), tuple(w_shape)
    _check_images(x_shape, geom)
    n, c = x_shape[:2]
    lead = (n,) if per_sample else ()
    at = len(lead)  # where O sits in w_shape
    if (
        len(w_shape) != at + 2 + nd
        or w_shape[:at] != lead
        or w_shape[at + 1] * groups != c
        or w_shape[at + 2 :] != geom.ksize
    ):
        want = ", ".join(str(v) for v in (*lead, "O", c // groups))
        raise ValueError(
            f"filters {w_shape} do not fit images {x_shape}: expected ({want}, "
            f"*{geom.ksize}) with {groups} group(s)"
        )
    o = w_shape[at]
    if o % groups:
        each = " per sample" if per_sample else ""
        raise ValueError(f"{o} filters{each} do not split into {groups} groups")
    out = geom.out_size(x_shape[2:])
    if dy_shape is not None:
        dy_shape, want = tuple(dy_shape), (n, o, *out)
        fits = dy_shape == want
        if adjoint and len(dy_shape) == len(want) and dy_shape[:2] == want[:2]:
            fits = _output_padded(x_shape[2:], geom.transpose_out_size(dy_shape[2:]), geom)
        if not fits:
            raise ValueError(f"output gradient {dy_shape} should be {want}")
    return out


def check_conv_transpose_grad(
    dy_shape: Sequence[int], x_shape: Sequence[int], w_shape: Sequence[int], geom: ConvGeometry
) -> None:
    """A transposed convolution's output gradient against its input and filters, which its
    backward reads as the adjoint's images and output gradient (``dy`` and ``x``).

    Args:
        dy_shape: ``(N, C_out, *out)``, ``out`` ``x``'s transposed size plus an output padding.
        x_shape: the transposed convolution's input, ``(N, C_in, *in)``.
        w_shape: ``(C_in, C_out/groups, *k)``.
        geom: kernel, stride, padding, dilation, groups.

    Raises:
        ValueError: naming the array that does not fit.
    """
    dy_shape, x_shape, w_shape = tuple(dy_shape), tuple(x_shape), tuple(w_shape)
    k, g = geom.ksize, geom.groups  # the filters alone first: below, dy would be blamed
    if len(w_shape) != 2 + geom.nd or w_shape[2:] != k or w_shape[0] % g:
        raise ValueError(f"filters {w_shape} should be (C_in, C_out/{g}, *{k}) with {g} group(s)")
    try:  # its message calls dy "images": a dy of the wrong channels read as a bad image
        check_conv_shapes(dy_shape, w_shape, geom)
    except ValueError as exc:
        raise ValueError(f"output gradient {dy_shape}: {exc}") from None
    n, c = dy_shape[0], w_shape[0]
    if len(x_shape) != len(dy_shape) or x_shape[:2] != (n, c):
        raise ValueError(
            f"input {x_shape} does not fit output gradient {dy_shape}: expected ({n}, {c}, *in)"
        )
    reach = geom.transpose_out_size(x_shape[2:])
    if not _output_padded(dy_shape[2:], reach, geom):
        raise ValueError(
            f"output gradient {dy_shape} should be {(*dy_shape[:2], *reach)} plus an output "
            f"padding below max(stride {geom.stride}, dilation {geom.dilation}) on each axis"
        )


def _output_padded(size: Sequence[int], reach: Sequence[int], geom: ConvGeometry) -> bool:
    """Whether ``size`` is ``reach`` (a transposed output size) plus an output padding the
    geometry allows, ``[0, max(stride, dilation))`` on each axis."""
    return all(
        0 <= m - r < max(s, d) for m, r, s, d in zip(size, reach, geom.stride, geom.dilation)
    )


def check_pool_shapes(
    x_shape: Sequence[int], geom: ConvGeometry, dy_shape: Sequence[int] | None = None
) -> tuple[int, ...]:
    """A pooling's input ``(N, C, *spatial)`` and, when given, its output gradient
    ``(N, C, *out)`` checked against its window; returns ``out``.

    Raises:
        ValueError: naming the array that does not fit.
    """
    x_shape = tuple(x_shape)
    _check_images(x_shape, geom)
    out = geom.out_size(x_shape[2:])
    if dy_shape is not None and tuple(dy_shape) != (*x_shape[:2], *out):
        raise ValueError(f"output gradient {tuple(dy_shape)} should be {(*x_shape[:2], *out)}")
    return out


def _check_images(x_shape: tuple[int, ...], geom: ConvGeometry) -> None:
    """Images of one spatial axis per kernel axis, which the kernel fits once padded."""
    if len(x_shape) != 2 + geom.nd:
        raise ValueError(f"expected {2 + geom.nd}-D images (N, C, *spatial), got {x_shape}")
    if min(geom.out_size(x_shape[2:])) < 1:
        raise ValueError(
            f"kernel {geom.ksize} (dilation {geom.dilation}) is larger than the images "
            f"{x_shape[2:]} padded by {geom.pad}"
        )
