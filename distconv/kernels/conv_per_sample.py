"""Convolution with its own filter bank for every sample, on numpy or cupy.

Paddle's ``ConvOperator`` convolves sample ``n`` with filters ``w[n]``. That is a grouped
convolution with ``groups = N * G`` over one image of ``N * C`` channels, and on a GPU cuDNN
runs it that way. On the CPU the im2col kernels of :mod:`distconv.kernels.conv` would then see
a batch of one: nothing to split over threads and one large column copy. Here the batch stays
the batch instead: each chunk of samples multiplies its own filters with its own columns, the
chunks run on parallel threads (:mod:`distconv.kernels.parallel`), and the input gradient at
stride 1 is itself a per-sample convolution with the flipped filters, as in
:mod:`distconv.kernels.conv`.

Layouts: input ``(N, C, *sp)``, filters ``(N, O, C/groups, *k)`` (a PyTorch weight per sample),
output ``(N, O, *out)``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from distconv.backend import get_array_module, is_gpu_array
from distconv.kernels import cudnn
from distconv.kernels.conv import (
    conv_backward,
    conv_forward,
    flip_pays,
    flip_weight,
    flipped_geometry,
    unflip_weight_grad,
)
from distconv.kernels.conv_columns import column_layout, grouped_columns, in_common_dtype
from distconv.kernels.finite import exact_if_not_finite, not_finite_on_cpu
from distconv.kernels.im2col import (
    col2im,
    col2im_wide,
    wide_col_size,
    widen_output,
    widen_output_channels_last,
)
from distconv.kernels.parallel import over_batch
from distconv.kernels.shape import ConvGeometry, volume
from distconv.kernels.shape_checks import check_conv_shapes

#: the fewest channels per group for which the flipped filter gradient multiplies the columns
#: by a contiguous copy of ``x^T`` (:func:`~distconv.kernels.im2col.widen_output_channels_last`)
#: rather than a transposed view: with numpy's AVX-512 kernels (OpenBLAS SkylakeX) the product
#: took 0.62-0.84x the time from 12 channels, 1.05-1.54x at 4-8; 9-11 won with 144 rows but
#: 10 lost with 90. The AVX2 kernels ran within a few per cent either way (docs/benchmarks.md,
#: "Why the constants are what they are")
CONTIGUOUS_X_MIN_CHANNELS = 12


def _per_sample_grouped(w: Any, groups: int) -> Any:
    """``(N, O, C/G, *k)`` -> ``(N, G, O/G, C/G * K)``."""
    n, o, cg = w.shape[:3]
    return w.reshape(n, groups, o // groups, cg * volume(w.shape[3:]))


def _check(x: Any, w: Any, geom: ConvGeometry, dy: Any = None) -> None:
    check_conv_shapes(x.shape, w.shape, geom, None if dy is None else dy.shape, per_sample=True)


def _as_one_image(x: Any, w: Any, geom: ConvGeometry) -> tuple[Any, Any, ConvGeometry]:
    """The same convolution as one image of ``N*C`` channels with ``N*G`` groups (for cuDNN)."""
    images = x.reshape(1, -1, *x.shape[2:])
    return images, w.reshape(-1, *w.shape[2:]), replace(geom, groups=x.shape[0] * geom.groups)


def _use_cudnn(*arrays: Any) -> bool:
    return is_gpu_array(arrays[0]) and cudnn.usable(*arrays) and arrays[0].shape[0] > 0


def per_sample_conv_forward(x: Any, w: Any, geom: ConvGeometry) -> Any:
    """``y[n] = conv(x[n], w[n])`` for every sample ``n``.

    Args:
        x: ``(N, C, *sp)``.
        w: ``(N, O, C/groups, *k)``.
        geom: kernel, stride, padding, dilation, groups (of one sample's convolution).

    Returns:
        ``(N, O, *out)``, in ``result_type(x, w)`` (:func:`in_common_dtype`).
    """
    _check(x, w, geom)
    x, w = in_common_dtype(x, w)
    out = geom.out_size(x.shape[2:])
    if _use_cudnn(x, w):
        return conv_forward(*_as_one_image(x, w, geom))[0].reshape(x.shape[0], -1, *out)
    xp = get_array_module(x, w)
    n = x.shape[0]
    wg = _per_sample_grouped(w, geom.groups)
    y = xp.empty((n, w.shape[1], *out), dtype=x.dtype)
    wide, wide_out = column_layout(x.shape[2:], geom)

    def run(a: int, b: int) -> None:
        col = grouped_columns(x, geom, a, b, wide, batched=False)
        y[a:b] = xp.matmul(wg[a:b], col).reshape(b - a, -1, *wide_out)[..., : out[-1]]

    over_batch(run, n, _work(x.shape[1], geom, out), on_gpu=is_gpu_array(x))
    return y


def per_sample_conv_backward(
    dy: Any, x: Any, w: Any, geom: ConvGeometry, need_dx: bool = True, need_dw: bool = True
) -> tuple[Any, Any]:
    """Gradients of :func:`per_sample_conv_forward` in ``x`` and ``w`` given ``dy``.

    Returns:
        ``(dx, dw)`` shaped like ``x`` and ``w``, in the forward's dtype; either is None when
        not needed.
    """
    _check(x, w, geom, dy)
    dy, x, w = in_common_dtype(dy, x, w)
    if _use_cudnn(dy, x, w):
        images, filters, grouped = _as_one_image(x, w, geom)
        dy1 = dy.reshape(1, -1, *dy.shape[2:])
        dx, dw = conv_backward(dy1, images, filters, grouped, need_dx, need_dw)
        return (
            None if dx is None else dx.reshape(x.shape),
            None if dw is None else dw.reshape(w.shape),
        )
    # an inf in w meets the zeros of dy's padding (flipped) or widening (wide col2im)
    exact = need_dx and not_finite_on_cpu(w)
    if need_dx and not exact and flip_pays(dy.shape, x.shape, geom):
        return _grads_by_flip(dy, x, w, geom, need_dw)
    dw = _weight_grad(dy, x, w, geom) if need_dw else None
    dx = _input_grad(dy, w, geom, tuple(x.shape), exact) if need_dx else None
    return dx, dw


def _work(channels: int, geom: ConvGeometry, out: tuple[int, ...]) -> int:
    """Column elements per sample, ``C * K * L``: what chunks are sized by."""
    return channels * geom.kernel_volume * volume(out)


def _weight_grad(dy: Any, x: Any, w: Any, geom: ConvGeometry, exact: bool = False) -> Any:
    """``dy[n] @ col(x[n])^T`` per sample; ``exact``: exact columns, not wide ones."""
    xp = get_array_module(dy, x, w)
    n, o = w.shape[:2]
    G = geom.groups
    dw = xp.empty(w.shape, dtype=w.dtype)
    wide, wide_out = column_layout(x.shape[2:], geom)
    if exact:
        wide, wide_out = False, tuple(dy.shape[2:])

    def run(a: int, b: int) -> None:
        col = grouped_columns(x, geom, a, b, wide, batched=False)
        gy = widen_output(dy[a:b], wide_out).reshape(b - a, G, o // G, -1)
        dw[a:b] = xp.matmul(gy, col.swapaxes(-1, -2)).reshape(dw[a:b].shape)

    over_batch(run, n, _work(x.shape[1], geom, tuple(dy.shape[2:])), on_gpu=is_gpu_array(x))
    return exact_if_not_finite(dw, wide, lambda: _weight_grad(dy, x, w, geom, exact=True))


def _grads_by_flip(dy: Any, x: Any, w: Any, geom: ConvGeometry, need_dw: bool) -> tuple[Any, Any]:
    """Both gradients at stride 1 from one set of columns, those of ``dy`` for the adjoint.

    The input gradient is a per-sample convolution of ``dy`` with the flipped filters; the
    filter gradient multiplies the same columns by ``x`` (:func:`~distconv.kernels.conv.
    unflip_weight_grad`), while they are still in cache, instead of building columns of ``x``
    as well.
    """
    xp = get_array_module(dy, x, w)
    n, G, c = x.shape[0], geom.groups, x.shape[1]
    adjoint = flipped_geometry(geom)
    wf = _per_sample_grouped(flip_weight(w, geom), G)  # (N, G, C/G, O/G * K)
    sp = tuple(x.shape[2:])
    wide, wide_out = column_layout(tuple(dy.shape[2:]), adjoint)
    dx = xp.empty(x.shape, dtype=dy.dtype)
    dw = xp.empty(w.shape, dtype=w.dtype) if need_dw else None

    def run(a: int, b: int) -> None:
        col = grouped_columns(dy, adjoint, a, b, wide, batched=False)  # (B, G, O/G * K, L)
        dx[a:b] = xp.matmul(wf[a:b], col).reshape(b - a, c, *wide_out)[..., : sp[-1]]
        if dw is not None:
            if c // G >= CONTIGUOUS_X_MIN_CHANNELS:
                xs_t = widen_output_channels_last(x[a:b], wide_out, G)  # (B, G, L, C/G)
            else:
                xs_t = widen_output(x[a:b], wide_out).reshape(b - a, G, c // G, -1)
                xs_t = xs_t.swapaxes(-1, -2)
            dw[a:b] = unflip_weight_grad(xp.matmul(col, xs_t), geom)

    over_batch(run, n, _work(dy.shape[1], adjoint, sp), on_gpu=is_gpu_array(dy))
    if dw is not None:
        dw = exact_if_not_finite(dw, wide, lambda: _weight_grad(dy, x, w, geom, exact=True))
    return dx, dw


def _input_grad(
    dy: Any, w: Any, geom: ConvGeometry, x_shape: tuple[int, ...], exact: bool = False
) -> Any:
    """``col2im(w[n]^T dy[n])`` per sample (where the adjoint convolution does not pay);
    ``exact``: exact columns and the plain col2im, which sums connected pairs only."""
    xp = get_array_module(dy, w)
    n, c = x_shape[:2]
    wt = _per_sample_grouped(w, geom.groups).swapaxes(-1, -2)  # (N, G, C/G*K, O/G)
    wide = tuple(dy.shape[2:]) if exact else wide_col_size(dy.shape[2:], x_shape[2:], geom)
    scatter = col2im if exact else col2im_wide
    dx = xp.empty(x_shape, dtype=dy.dtype)

    def run(a: int, b: int) -> None:
        gy = widen_output(dy[a:b], wide).reshape(b - a, geom.groups, wt.shape[-1], -1)
        col = xp.matmul(wt[a:b], gy).reshape((b - a, c, *geom.ksize, *wide))
        dx[a:b] = scatter(col, (b - a, c, *x_shape[2:]), geom)

    over_batch(run, n, _work(c, geom, tuple(dy.shape[2:])), on_gpu=is_gpu_array(dy))
    return dx
