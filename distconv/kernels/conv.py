"""Convolution by im2col/col2im for any number of spatial axes, grouped, on numpy or cupy.

Layouts follow PyTorch: input ``(N, C, *sp)``, weight ``(O, C/groups, *k)``. A transposed
convolution is the adjoint of a convolution, so it reuses these same four functions with the
roles of input and output swapped (as Chainer's deconvolution does):

=====================  ==========================================================
conv forward           ``conv_forward(x, w)``
conv backward          ``conv_backward(dy, x, w)`` -> dx, dw
transposed forward     ``conv_backward_data(x, w, out_shape)``
transposed backward    ``conv_forward(dy, w, dw_from=x)`` -> dx, dw in one pass
=====================  ==========================================================

On cupy arrays the work goes to cuDNN when it is there (:mod:`distconv.kernels.cudnn`), else the
same im2col code runs on the device. On the CPU every function splits the batch into chunks run
on parallel threads (see ``parallel``); within a chunk all work is batched matrix products and
strided copies, or a strided depthwise input gradient's multiply-adds per kernel tap
(:mod:`distconv.kernels.conv_depthwise`), with no loop over samples. Which layout a chunk runs
in is chosen by :mod:`distconv.kernels.conv_layout`.
"""

from __future__ import annotations

from typing import Any

from distconv.backend import get_array_module, is_gpu_array, sum_dtype
from distconv.kernels import cudnn
from distconv.kernels.conv_columns import (
    Columns,
    batch_inner,
    col2im_batched,
    column_layout,
    from_batch_inner,
    grouped_columns,
    in_common_dtype,
)
from distconv.kernels.conv_dense import conv_backward_data_dense
from distconv.kernels.conv_depthwise import depthwise_data_grad, depthwise_data_grad_applies
from distconv.kernels.conv_layout import dense_pays, gradients_beside, run_chunks
from distconv.kernels.conv_shifted import (
    Taps,
    data_grad_chunk,
    forward_chunk,
    shifted_applies,
    shifted_weight_grad_pays,
    weight_grad_chunk,
)
from distconv.kernels.finite import exact_if_not_finite, not_finite_on_cpu
from distconv.kernels.im2col import (
    col2im_wide,
    pad_spatial,
    wide_col_size,
    widen_output,
)
from distconv.kernels.parallel import over_batch, side_by_side
from distconv.kernels.shape import ConvGeometry, volume
from distconv.kernels.shape_checks import check_conv_shapes, check_conv_transpose_grad


def grouped_weight(w: Any, groups: int) -> Any:
    """``(O, C/G, *k)`` -> ``(G, O/G, C/G * K)``."""
    return w.reshape(groups, w.shape[0] // groups, -1)


def _sum_weight_grad(partials: list[Any], w: Any) -> Any:
    """The chunks' partial weight gradients summed, C-contiguous in ``w``'s shape and dtype (a
    batched chunk may return its product transposed; a buffer API downstream wants plain
    memory). A 16-bit weight's partials are added in float32 (:func:`sum_dtype`)."""
    total = partials[0].astype(sum_dtype(w.dtype) or w.dtype, copy=False)
    for p in partials[1:]:
        total = total + p
    xp = get_array_module(total)
    return xp.ascontiguousarray(total.astype(w.dtype, copy=False)).reshape(w.shape)


def conv_forward(
    x: Any,
    w: Any,
    geom: ConvGeometry,
    dw_from: Any = None,
    want_y: bool = True,
    columns: Columns | None = None,
    exact: bool = False,
) -> tuple[Any, Any]:
    """``y = conv(x, w)`` and, when ``dw_from`` is given, ``dw = sum_n dw_from_n @ col(x_n)^T``.

    The second output is the weight gradient of a convolution whose input is ``x`` and whose
    output gradient is ``dw_from``; computing it here shares the columns of ``x``, which is what
    a transposed convolution's backward needs.

    Args:
        x: ``(N, C, *sp)``.
        w: ``(O, C/groups, *k)``.
        geom: kernel, stride, padding, dilation, groups.
        dw_from: ``(N, O, *out)`` or None.
        want_y: compute ``y`` (False when only the weight gradient is wanted).
        columns: a forward keeps its columns here; a weight gradient reuses those it finds.
        exact: exact columns only, neither wide ones nor shifted taps: what a weight gradient
            that met an inf or NaN is computed again with (see
            :func:`~distconv.kernels.finite.exact_if_not_finite`).

    Returns:
        ``(y, dw)``: ``y`` of shape ``(N, O, *out)`` or None; ``dw`` of ``w``'s shape or None.
    """
    out = check_conv_shapes(x.shape, w.shape, geom, None if dw_from is None else dw_from.shape)
    reads = (x, w) if dw_from is None else (x, w, dw_from)
    if is_gpu_array(x) and cudnn.usable(*reads, shapes=((x.shape[0], w.shape[0], *out),)):
        y = cudnn.conv_forward(x, w, geom) if want_y else None
        dw = None if dw_from is None else cudnn.conv_backward_weight(x, dw_from, geom, w.shape)
        return y, dw
    xp = get_array_module(x, w)
    n, g = x.shape[0], geom.groups
    wg = grouped_weight(w, g)
    y = xp.empty((n, w.shape[0], *out), dtype=x.dtype) if want_y else None
    wide, wide_out = column_layout(x.shape[2:], geom, w.shape)
    if exact:
        wide, wide_out = False, out
    work = x.shape[1] * geom.kernel_volume * volume(out)
    shifted = shifted_applies(x, w, geom) and not exact
    taps = Taps(w, geom, tuple(x.shape[2:])) if shifted else None
    # the weight gradient by taps too, unless dtypes differ or groups are narrow
    by_taps = dw_from is not None and shifted_weight_grad_pays(x, dw_from, w, geom)
    taps_dw = taps if by_taps else None

    junk = [False]  # whether a weight gradient read past rows' ends (wide columns, taps)

    def run(a: int, b: int, batched: bool) -> Any:
        make_y = want_y
        if dw_from is not None and not batched and (wide or taps_dw is not None):
            junk[0] = True
        if taps is not None and not batched:  # one product per tap, no columns
            if want_y:
                forward_chunk(x[a:b], taps, y[a:b])
            if dw_from is None:
                return None
            if taps_dw is not None:
                return weight_grad_chunk(x[a:b], dw_from[a:b], taps_dw)
            make_y = False  # the weight gradient by columns, below
        col = columns.get((a, b, batched)) if columns is not None and not make_y else None
        if col is None:
            col = grouped_columns(x, geom, a, b, wide, batched)
            if columns is not None and make_y:
                columns.keep((a, b, batched), col)
        if make_y and batched:
            y[a:b] = from_batch_inner(xp.matmul(wg, col), b - a, out)
        elif make_y and not wide:  # exact columns: the product is the output
            xp.matmul(wg, col, out=y[a:b].reshape(b - a, g, wg.shape[1], -1))
        elif make_y:
            y[a:b] = xp.matmul(wg, col).reshape((b - a, -1, *wide_out))[..., : out[-1]]
        if dw_from is None:
            return None
        if batched:  # the longer side as the product's rows, BLAS's faster way round
            dy_b = batch_inner(dw_from[a:b], g)
            if col.shape[-2] > dy_b.shape[-2]:
                return xp.matmul(col, dy_b.swapaxes(-1, -2)).swapaxes(-1, -2)
            return xp.matmul(dy_b, col.swapaxes(-1, -2))
        gy = widen_output(dw_from[a:b], wide_out).reshape(b - a, g, wg.shape[1], -1)
        # over the chunk's samples: a 16-bit sum in float32, as every sum of a batch is
        return xp.matmul(gy, col.swapaxes(-1, -2)).sum(axis=0, dtype=sum_dtype(gy.dtype))

    key = ("fwd" if want_y else "") + ("dw" if dw_from is not None else "")
    partials = run_chunks(run, key, x, w, geom, work)
    if dw_from is None:
        return y, None
    if not partials:  # an empty batch: its gradient is zero
        return y, xp.zeros_like(w)
    dw = _sum_weight_grad(partials, w)

    def again() -> Any:
        return conv_forward(x, w, geom, dw_from, want_y=False, exact=True)[1]

    return y, exact_if_not_finite(dw, junk[0], again)


def conv_backward_data(g: Any, w: Any, geom: ConvGeometry, x_shape: tuple[int, ...]) -> Any:
    """The adjoint of :func:`conv_forward` in ``x``: ``col2im(w^T @ g)`` of shape ``x_shape``.

    This is both a convolution's input gradient and a transposed convolution's forward.

    Args:
        g: ``(N, O, *out)`` where ``out == geom.out_size(x_shape[2:])``.
        w: ``(O, C/groups, *k)``.
        x_shape: ``(N, C, *sp)``.
    """
    check_conv_shapes(x_shape, w.shape, geom, g.shape, adjoint=True)
    # cuDNN also gets g widened to the convolution's output of x_shape, and writes x_shape
    conv_shaped = (*g.shape[:2], *geom.out_size(x_shape[2:]))
    if is_gpu_array(g) and cudnn.usable(g, w, shapes=(tuple(x_shape), conv_shaped)):
        # cuDNN wants g exactly conv-shaped; output_padding >= stride leaves it a row short
        g = widen_output(g, geom.out_size(x_shape[2:]))
        return cudnn.conv_backward_data(g, w, geom, x_shape)
    if depthwise_data_grad_applies(x_shape[1], w.shape[0], geom):  # strided: no tiny products
        return depthwise_data_grad(g, w, geom, x_shape)
    # the fast routes multiply zeros that stand for no pixel pair; an inf in w meets them,
    # and in the dense matrix every value of g does
    exact = not_finite_on_cpu(w)
    sizes = (tuple(g.shape[2:]), tuple(x_shape[2:]))
    if not exact and not is_gpu_array(g) and dense_pays(g.shape[0], *sizes, w.shape, geom):
        if not not_finite_on_cpu(g):
            return conv_backward_data_dense(g, w, geom, x_shape)
        exact = True
    if not exact and flip_pays(g.shape, x_shape, geom):
        return _conv_backward_data_by_flip(g, w, geom, x_shape)
    xp = get_array_module(g, w)
    n, c = x_shape[:2]
    G = geom.groups
    wt = grouped_weight(w, G).swapaxes(-1, -2)  # (G, C/G*K, O/G)
    out = tuple(g.shape[2:])
    dx = xp.empty(tuple(x_shape), dtype=g.dtype)
    wide = wide_col_size(out, x_shape[2:], geom)
    taps = Taps(w, geom, tuple(x_shape[2:])) if shifted_applies(g, w, geom) else None

    def run(a: int, b: int, batched: bool) -> None:
        if taps is not None and not batched:  # a col2im without columns
            data_grad_chunk(g[a:b], taps, dx[a:b])
            return
        if batched:
            col = xp.matmul(wt, batch_inner(g[a:b], G))
            dx[a:b] = col2im_batched(col, out, (b - a, c, *x_shape[2:]), geom)
            return
        gy = widen_output(g[a:b], wide).reshape(b - a, G, wt.shape[2], -1)
        col = xp.matmul(wt, gy).reshape((b - a, c, *geom.ksize, *wide))
        dx[a:b] = col2im_wide(col, (b - a, c, *x_shape[2:]), geom)

    work = c * geom.kernel_volume * volume(out)
    if exact:  # batched columns are exact: col2im sums connected pairs only
        over_batch(lambda a, b: run(a, b, True), n, work)
    else:
        run_chunks(run, "dx", g, w, geom, work)
    return dx


def flip_pays(g_shape: tuple[int, ...], x_shape: tuple[int, ...], geom: ConvGeometry) -> bool:
    """Whether to compute the adjoint as a convolution with the flipped kernel.

    It is one at stride 1 with padding within the kernel's reach. It pays when its columns
    (``O*K`` per input pixel) are no more than col2im's (``C*K`` per output pixel): true for
    the usual same-padded layers, false where few channels fan out (LeNet's 6 -> 16, 12x12
    -> 8x8).
    """
    if any(s != 1 for s in geom.stride) or any(
        p > d * (k - 1) for p, d, k in zip(geom.pad, geom.dilation, geom.ksize)
    ):
        return False
    if geom.transpose_out_size(g_shape[2:]) != tuple(x_shape[2:]):
        return False  # output_padding: the flipped convolution would come out short
    return g_shape[1] * volume(x_shape[2:]) <= x_shape[1] * volume(g_shape[2:])


def _conv_backward_data_by_flip(
    g: Any, w: Any, geom: ConvGeometry, x_shape: tuple[int, ...]
) -> Any:
    """At stride 1, ``col2im(w^T g)`` equals a convolution of ``g`` with the flipped kernel.

    A forward convolution copies each pixel once into its columns, where col2im adds into every
    pixel once per kernel offset.
    """
    return conv_forward(g, flip_weight(w, geom), flipped_geometry(geom))[0]


def flip_weight(w: Any, geom: ConvGeometry) -> Any:
    """``(..., O, C/G, *k)`` -> ``(..., C, O/G, *k)`` flipped in space: the adjoint's kernel.

    Leading axes (a filter bank per sample) carry through.
    """
    xp = get_array_module(w)
    G, ks = geom.groups, geom.ksize
    lead, (o, cg) = w.shape[: -2 - geom.nd], w.shape[-2 - geom.nd : -geom.nd]
    # (O, C/G) -> (G, O/G, C/G) -> (G, C/G, O/G) -> (C, O/G), per leading index
    wf = w.reshape(*lead, G, o // G, cg, *ks).swapaxes(-1 - geom.nd, -2 - geom.nd)
    wf = wf.reshape(*lead, G * cg, o // G, *ks)
    return xp.ascontiguousarray(wf[(...,) + (slice(None, None, -1),) * geom.nd])


def unflip_weight_grad(t: Any, geom: ConvGeometry) -> Any:
    """``(..., G, O/G * K, C/G)`` products of the flipped columns of ``dy`` with ``x`` ->
    the weight gradient ``(..., O, C/G, *k)``.

    At stride 1 the adjoint convolution's columns of ``dy`` (rows ``(o, tap)`` with the taps
    flipped, one column per input pixel) times ``x`` sum ``dy * x`` over exactly the pixel
    pairs the weight gradient sums: the same gradient from the columns the input gradient
    built, with the taps flipped back and ``C/G`` moved before them.
    """
    xp = get_array_module(t)
    lead, (g, _, cg), ks = t.shape[:-3], t.shape[-3:], geom.ksize
    t = t.reshape(*lead, g, -1, *ks, cg)[
        (...,) + (slice(None, None, -1),) * geom.nd + (slice(None),)
    ]
    t = xp.moveaxis(t, -1, -1 - geom.nd)  # (..., G, O/G, C/G, *k)
    return xp.ascontiguousarray(t).reshape(*lead, -1, cg, *ks)


def flipped_geometry(geom: ConvGeometry) -> ConvGeometry:
    """The geometry of the adjoint at stride 1: padding ``d(k-1) - p`` on each axis."""
    pad = tuple(d * (k - 1) - p for p, d, k in zip(geom.pad, geom.dilation, geom.ksize))
    return ConvGeometry(geom.ksize, geom.stride, pad, geom.dilation, geom.groups)


def conv_backward(
    dy: Any,
    x: Any,
    w: Any,
    geom: ConvGeometry,
    need_dx: bool = True,
    need_dw: bool = True,
    columns: Columns | None = None,
) -> tuple[Any, Any]:
    """Input and weight gradients of ``y = conv_forward(x, w)`` given ``dy``.

    ``columns``: what the forward kept (:class:`Columns`), reused for the weight gradient.

    Returns:
        ``(dx, dw)``, either None when not needed.
    """

    # exactly the output's shape: conv_backward_data's own check lets an adjoint's input be short
    check_conv_shapes(x.shape, w.shape, geom, dy.shape)

    def weight_grad() -> Any:
        return conv_forward(x, w, geom, dw_from=dy, want_y=False, columns=columns)[1]

    def input_grad() -> Any:
        return conv_backward_data(dy, w, geom, x.shape)

    out = tuple(dy.shape[2:])
    if need_dx and need_dw and gradients_beside(x.shape, w.shape, out, geom, is_gpu_array(x)):
        return side_by_side(input_grad, weight_grad)  # the input gradient is the longer
    return (input_grad() if need_dx else None), (weight_grad() if need_dw else None)


def conv_any_forward(
    x: Any,
    w: Any,
    geom: ConvGeometry,
    transposed: bool,
    out_size: tuple[int, ...],
    columns: Columns | None = None,
) -> Any:
    """A convolution, or a transposed one, of ``x`` to spatial size ``out_size``.

    The one forward that convolution layers and projections share, whatever their direction.
    A convolution keeps its columns in ``columns`` for the backward (a transposed one builds
    its columns from the output gradient, so it keeps none). It computes in
    ``result_type(x, w)`` (:func:`in_common_dtype`), as a fully connected layer does.
    """
    x, w = in_common_dtype(x, w)
    if transposed:
        return conv_backward_data(x, w, geom, (x.shape[0], w.shape[1] * geom.groups, *out_size))
    return conv_forward(x, w, geom, columns=columns)[0]


def conv_any_backward(
    dy: Any,
    x: Any,
    w: Any,
    geom: ConvGeometry,
    transposed: bool,
    need_dx: bool,
    need_dw: bool,
    columns: Columns | None = None,
) -> tuple[Any, Any]:
    """Input and weight gradients of :func:`conv_any_forward`; either is None when not needed.

    ``columns``: what :func:`conv_any_forward` kept for this call's ``x``, or None. The
    gradients come in the forward's dtype; adding the input's into its own dtype is the
    caller's (``add_grad``, ``+=``), as a fully connected layer's is.
    """
    dy, x, w = in_common_dtype(dy, x, w)
    if not transposed:
        return conv_backward(dy, x, w, geom, need_dx, need_dw, columns)
    check_conv_transpose_grad(dy.shape, x.shape, w.shape, geom)
    if geom.out_size(dy.shape[2:]) != tuple(x.shape[2:]):
        dy, geom = _within_input(dy, tuple(x.shape[2:]), geom)
    return conv_forward(dy, w, geom, dw_from=x if need_dw else None, want_y=need_dx)


def _within_input(
    dy: Any, in_size: tuple[int, ...], geom: ConvGeometry
) -> tuple[Any, ConvGeometry]:
    """``dy`` padded (:func:`pad_spatial`) and cut to the rows that the transposed
    convolution's input reaches, with an unpadded geometry: the adjoint then comes out exactly
    ``in_size``.

    With output_padding >= stride the padded adjoint reaches one row past the input. Computing
    that row and dropping it is right for the input gradient, but the weight gradient would
    multiply ``dy`` by zeros standing for pixels that do not exist, and an inf in ``dy`` there
    would come out as NaN where the definition sums no such product.
    """
    reach = tuple(
        slice(0, (n - 1) * s + d * (k - 1) + 1)
        for n, s, d, k in zip(in_size, geom.stride, geom.dilation, geom.ksize)
    )
    # the padded dy is never shorter than the reach, so the cut is a view of one copy
    padded = pad_spatial(dy, geom.pad)[(slice(None), slice(None)) + reach]
    unpadded = ConvGeometry(geom.ksize, geom.stride, (0,) * geom.nd, geom.dilation, geom.groups)
    return padded, unpadded
