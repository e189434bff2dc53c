"""cuDNN convolutions through cupy, used for cupy arrays when cuDNN is there.

That is CuPy 13 with cuDNN 8, the version its wheels link (``libcudnn.so.8``): CuPy's
``python -m cupyx.tools.install_library --cuda 12.x --library cudnn``, or a system cuDNN 8 on
the loader's path (the ``nvidia-cudnn-cu12`` wheel now brings cuDNN 9, which CuPy 13 does not
load). CuPy 14 dropped ``cupyx.cudnn``, and then the device runs the im2col kernels
(:func:`available`).

Only :mod:`distconv.kernels.conv` calls this module, and only with cupy arrays, so nothing here
runs (or imports cupy) on a CPU-only machine. ``DISTCONV_CUDNN=0`` (or ``false``, ``no``,
``off``, read as ``DISTCONV_DEBUG`` is) turns it off, which makes the im2col code run on the
device instead (useful to compare the two).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from distconv.kernels.shape import ConvGeometry, volume
from distconv.messages import env_switch, named

_FLOATS = ("float16", "float32", "float64")
#: the most elements a cuDNN tensor holds: its descriptors count in 32-bit ints, and refuse a
#: tensor of more (cudnnSetTensorNdDescriptor: "exceeds the maximum limit of 2 Giga-elements"),
#: which an H200 holds with room to spare (8 GiB in float32)
MOST_ELEMENTS = 2**31 - 1
#: how to get the cuDNN that CuPy 13 loads, named where its library did not load
_CUDNN_8 = (
    "CuPy 13 loads cuDNN 8 (libcudnn.so.8): python -m cupyx.tools.install_library "
    "--cuda 12.x --library cudnn, or a system cuDNN 8; not the nvidia-cudnn-cu12 wheel's cuDNN 9"
)


@lru_cache(maxsize=1)
def _load() -> tuple[Any, str | None]:
    """``(cupyx.cudnn, None)``, or ``(None, why not)``: the exception names the cause, so a
    broken install (a mismatched or missing libcudnn) does not pass for a CuPy without cuDNN."""
    try:
        import cupyx.cudnn as cudnn
        from cupy.cuda import cudnn as _lib  # noqa: F401  (raises when cuDNN is missing)
    except Exception as e:  # noqa: BLE001  (any failure to load means: no cuDNN here)
        try:
            import cupy

            version = f"CuPy {cupy.__version__}"
        except Exception:  # noqa: BLE001
            version = "no CuPy"
        major = re.match(r"CuPy (\d+)", version)
        removed = major is not None and int(major.group(1)) >= 14
        cause = "CuPy 14 removed cupyx.cudnn" if removed else named(e)
        if not removed and "libcudnn" in str(e):  # the library, not CuPy, is what is missing
            cause += f" ({_CUDNN_8})"
        return None, f"{version}: {cause}"
    return cudnn, None


def _cudnn() -> Any:
    return _load()[0]


def available() -> bool:
    """Whether this CuPy reaches cuDNN at all (``cupyx.cudnn`` and the library load).

    CuPy 14 removed its cuDNN bindings: with it, or without the cuDNN library, convolutions on
    the device run on the im2col kernels, whatever ``DISTCONV_CUDNN`` says
    (:func:`unavailable_reason` says which).
    """
    return _cudnn() is not None


def unavailable_reason() -> str | None:
    """Why cuDNN cannot be used here (the CuPy version and the cause), or None when it can."""
    return _load()[1]


def usable(*arrays: Any, shapes: tuple[tuple[int, ...], ...] = ()) -> bool:
    """Whether cuDNN can run a convolution on these (cupy) arrays: one float dtype for all,
    no empty one, none of fewer than 4 dimensions, and none, nor any other tensor cuDNN is
    handed (its output: ``shapes``), of more than :data:`MOST_ELEMENTS` elements (an empty
    batch, a 1-D convolution and a larger tensor run on the im2col kernels, which handle
    them)."""
    if env_switch("DISTCONV_CUDNN") is False:  # 0, false, no, off; "off" once kept cuDNN on
        return False
    # cuDNN's tensor descriptors refuse a zero dimension, and fewer than 4 dimensions
    # (cudnnSetTensorNdDescriptor): a 1-D convolution's (N, C, L) is one short
    if not all(a.size and a.ndim >= 4 for a in arrays):
        return False
    if max(volume(shape) for shape in (*(a.shape for a in arrays), *shapes)) > MOST_ELEMENTS:
        return False
    dtypes = {a.dtype.name for a in arrays}
    return available() and len(dtypes) == 1 and dtypes <= set(_FLOATS)


def _conv_params(geom: ConvGeometry) -> tuple:
    """cupyx.cudnn's positional convolution parameters: pad, stride, dilation, groups."""
    return geom.pad, geom.stride, geom.dilation, geom.groups


#: cupyx.cudnn's keyword options: let cuDNN pick the fastest algorithm once per shape
_TUNE = {"auto_tune": True, "tensor_core": "auto"}


def conv_forward(x: Any, w: Any, geom: ConvGeometry) -> Any:
    """``y = conv(x, w)`` by cuDNN; layouts as in :mod:`distconv.kernels.conv`."""
    import cupy

    y = cupy.empty((x.shape[0], w.shape[0], *geom.out_size(x.shape[2:])), dtype=x.dtype)
    _cudnn().convolution_forward(
        cupy.ascontiguousarray(x), cupy.ascontiguousarray(w), None, y, *_conv_params(geom), **_TUNE
    )
    return y


def conv_backward_data(g: Any, w: Any, geom: ConvGeometry, x_shape: tuple[int, ...]) -> Any:
    """``col2im(w^T g)`` by cuDNN: a convolution's input gradient, a transposed forward."""
    import cupy

    dx = cupy.empty(tuple(x_shape), dtype=g.dtype)
    _cudnn().convolution_backward_data(
        cupy.ascontiguousarray(w),
        cupy.ascontiguousarray(g),
        None,
        dx,
        *_conv_params(geom),
        deterministic=False,
        **_TUNE,
    )
    return dx


def conv_backward_weight(x: Any, g: Any, geom: ConvGeometry, w_shape: tuple[int, ...]) -> Any:
    """``sum_n g_n @ col(x_n)^T`` by cuDNN: the weight gradient of ``y = conv(x, w)``."""
    import cupy

    dw = cupy.empty(tuple(w_shape), dtype=x.dtype)
    _cudnn().convolution_backward_filter(
        cupy.ascontiguousarray(x),
        cupy.ascontiguousarray(g),
        dw,
        *_conv_params(geom),
        deterministic=False,
        **_TUNE,
    )
    return dw
