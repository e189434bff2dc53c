"""Max and average pooling over any number of spatial axes, by the im2col view.

The window of every output position is one slab of :func:`im2col_view`; pooling reduces it, and
the backward scatters through :func:`col2im`, so pooling shares the convolution's shape code.
"""

from __future__ import annotations

from typing import Any

from distconv.backend import get_array_module
from distconv.kernels.im2col import col2im, im2col_view
from distconv.kernels.shape import ConvGeometry


def _windows(x: Any, geom: ConvGeometry, pad_value: float) -> Any:
    """``(N, C, K, *out)``: each output position's window flattened on axis 2 (one copy)."""
    view = im2col_view(x, geom, pad_value)
    n, c = view.shape[:2]
    return view.reshape(n, c, geom.kernel_volume, *view.shape[2 + geom.nd :])


def max_pool_forward(x: Any, geom: ConvGeometry) -> tuple[Any, Any]:
    """Max over each window; padding never wins. Returns ``(y, argmax)``; argmax feeds backward."""
    win = _windows(x, geom, float("-inf"))
    idx = win.argmax(axis=2)
    xp = get_array_module(x)
    y = xp.take_along_axis(win, idx[:, :, None], axis=2)[:, :, 0]
    return y, idx


def max_pool_backward(dy: Any, idx: Any, geom: ConvGeometry, x_shape: tuple[int, ...]) -> Any:
    """Route each output gradient to the input element that was the window's maximum."""
    xp = get_array_module(dy)
    k = xp.arange(geom.kernel_volume).reshape((1, 1, -1) + (1,) * geom.nd)
    dcol = (k == idx[:, :, None]) * dy[:, :, None]
    n, c = dy.shape[:2]
    return col2im(dcol.reshape(n, c, *geom.ksize, *dy.shape[2:]), x_shape, geom)


def avg_pool_forward(x: Any, geom: ConvGeometry) -> Any:
    """Mean over each window, padding counted as zeros (PyTorch's ``count_include_pad=True``)."""
    return _windows(x, geom, 0.0).mean(axis=2)


def avg_pool_backward(dy: Any, geom: ConvGeometry, x_shape: tuple[int, ...]) -> Any:
    """Spread each output gradient evenly over its window."""
    xp = get_array_module(dy)
    n, c = dy.shape[:2]
    share = (dy / geom.kernel_volume)[:, :, None]
    dcol = xp.broadcast_to(share, (n, c, geom.kernel_volume, *dy.shape[2:]))
    return col2im(dcol.reshape(n, c, *geom.ksize, *dy.shape[2:]), x_shape, geom)
