"""Max and average pooling over any number of spatial axes.

A window of ``K`` elements (``K`` = kernel volume, 4 for 2x2) is ``K`` shifted, strided views of
the (padded) input, each of the output's shape. Average pooling folds them with ``K - 1``
elementwise adds into one output buffer (``out=``, no temporaries). Max pooling first copies
each view contiguous (:class:`PoolState`: ``K`` copies of the output's size, which is the
input's size when windows tile it) and folds those with ``maximum``; its backward compares the
copies with ``y`` (window-position masks, ``x == y``, the first position of a tie winning) and
adds the masked gradient into the views, with no index gather. Windows whose maximum is NaN or
a ``-inf`` tied with the padding, and an inf or NaN in ``dy``, route their gradient as PyTorch
does (:mod:`~distconv.kernels.pool_rare`).

When windows tile the input exactly (kernel = stride, no padding, sizes divisible: the usual 2x2
pooling), each input element belongs to exactly one view, so the backward writes the gradient
instead of zero-filling and adding. On small maps (rows of a few elements, where a strided copy
pays numpy's per-row cost on every row) such a max pooling moves its windows with one ``take``
each way through an index permutation cached per shape instead (see
:data:`GATHER_ROWS_UNDER`): an index gather, measured faster there than the strided copies
(docs/benchmarks.md). A reshape to ``(N, C, H/k, k, W/k, k)`` reduced over the window axes is
the other way to tile; numpy reduces over such strided axes element by element, and it ran
slower than either (docs/benchmarks-history.md).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np

from distconv.allocator import keeps_freed_memory
from distconv.backend import get_array_module, is_gpu_array, sum_dtype, widened
from distconv.kernels.im2col import pad_spatial
from distconv.kernels.parallel import over_batch
from distconv.kernels.pool_rare import RareWindows
from distconv.kernels.shape import ConvGeometry, volume
from distconv.kernels.shape_checks import check_pool_shapes

_ALL2 = (slice(None), slice(None))

#: a tiling pooling on the CPU whose output rows are shorter than this moves its windows with
#: one ``take`` through a cached permutation: K strided copies pay numpy's per-row cost K
#: times, and the digits' 8x8 and 4x4 maps have rows of 4 and 2 elements
#: (docs/benchmarks-history.md: the constants table, and "This stop: a faster machine") ...
GATHER_ROWS_UNDER = 8
#: ... on inputs of at most this many bytes, counting at least 4 an element: the range measured
#: (float32 up to 64x32x8x8), which also bounds the cached permutations (8 bytes an element,
#: two caches of the last 8 shapes: at most 16 MiB) ...
GATHER_MAX_BYTES = 512 << 10
#: ... and in the backward, unless distconv keeps freed memory (``keep_freed_memory``), only on
#: inputs under this many bytes: it makes an input-sized temporary, and under glibc's default
#: mmap threshold that comes from the heap. A heuristic: glibc moves its thresholds as blocks
#: are freed. At 16x32x8x8 the permutation route took 201 against 61 us on the default
#: allocator (each call mapped and faulted in fresh pages), while at 64x32x8x8 it was still
#: faster (120 against 156 us)
SCATTER_MAX_BYTES = 128 << 10


def _offset_views(a: Any, geom: ConvGeometry, out: tuple[int, ...]) -> Iterator[Any]:
    """For each kernel offset in row-major order, the ``(N, C, *out)`` strided view of ``a``."""
    for offset in itertools.product(*(range(k) for k in geom.ksize)):
        yield a[
            _ALL2
            + tuple(
                slice(o * d, o * d + s * (n - 1) + 1, s)
                for o, d, s, n in zip(offset, geom.dilation, geom.stride, out)
            )
        ]


def tiles_exactly(geom: ConvGeometry, in_size: tuple[int, ...]) -> bool:
    """Whether the windows cover every input element exactly once (kernel = stride, no pad)."""
    return (
        not any(geom.pad)
        and geom.stride == geom.ksize
        and all(d == 1 or k == 1 for d, k in zip(geom.dilation, geom.ksize))
        and all(n % k == 0 for n, k in zip(in_size, geom.ksize))
    )


def _gathers(x_shape: tuple[int, ...], a: Any, geom: ConvGeometry, backward: bool = False) -> bool:
    """Whether a pooling of an input of ``x_shape``, computing in ``a``'s type and device,
    moves its windows by permutation (its forward, or its ``backward``)."""
    n = volume(x_shape)
    if is_gpu_array(a) or n * max(a.dtype.itemsize, 4) > GATHER_MAX_BYTES:
        return False
    if backward and not keeps_freed_memory() and n * a.dtype.itemsize >= SCATTER_MAX_BYTES:
        return False
    return (
        tiles_exactly(geom, tuple(x_shape[2:]))
        and x_shape[-1] // geom.ksize[-1] < GATHER_ROWS_UNDER
    )


@functools.lru_cache(maxsize=8)
def _tile_gather(x_shape: tuple[int, ...], ksize: tuple[int, ...]) -> Any:
    """Where each window element of a tiling pooling lies in an input of ``x_shape``:
    ``x.take(gather)`` is the windows, ``(K, N, C, *out)`` flattened, offsets in row-major
    order as :func:`_offset_views` yields them. Shared by later calls: never written."""
    n, c, *size = x_shape
    split = [n, c]  # each spatial axis splits into (window, offset in the window)
    for length, k in zip(size, ksize):
        split += [length // k, k]
    nd = len(ksize)
    order = [3 + 2 * a for a in range(nd)] + [0, 1] + [2 + 2 * a for a in range(nd)]
    gather = np.ascontiguousarray(np.arange(volume(x_shape)).reshape(split).transpose(order))
    gather = gather.reshape(-1)
    gather.flags.writeable = False
    return gather


@functools.lru_cache(maxsize=8)
def _tile_scatter(x_shape: tuple[int, ...], ksize: tuple[int, ...]) -> Any:
    """The inverse of :func:`_tile_gather`: ``windows.take(scatter)`` is ``x`` again."""
    gather = _tile_gather(x_shape, ksize)
    scatter = np.empty_like(gather)
    scatter[gather] = np.arange(gather.size)
    scatter.flags.writeable = False
    return scatter


class PoolState:
    """What a max pooling's backward needs: the window elements, offset by offset, and ``y``.

    ``windows[k]`` is a contiguous copy of offset ``k``'s view, ``(K, N, C, *out)`` in all: the
    backward's comparisons then run on contiguous memory, several times faster than on the
    strided views; the copy costs less than it saves.
    """

    __slots__ = ("windows", "y")

    def __init__(self, windows: Any, y: Any) -> None:
        self.windows, self.y = windows, y


def _fold(
    x: Any, geom: ConvGeometry, pad_value: float, op: str, scale: float = 1.0
) -> tuple[Any, Any]:
    """``op`` (``"maximum"`` or ``"add"``) over the window views, times ``scale``; returns
    ``(y, padded x)``."""
    xp = get_array_module(x)
    out = check_pool_shapes(x.shape, geom)
    xpad = pad_spatial(x, geom.pad, pad_value)
    y = xp.empty((*x.shape[:2], *out), dtype=x.dtype)
    fold = getattr(xp, op)
    # a 16-bit window's sum in float32: numpy adds bfloat16 in bfloat16, and a global average
    # over 64x64 positions of 0.1 came out 0.0078 (float16: 0.0625)
    wide = sum_dtype(x.dtype) if op == "add" else None

    def run(a: int, b: int) -> None:
        views = _offset_views(xpad[a:b], geom, out)
        first, yc = next(views), y[a:b]
        if geom.kernel_volume == 1:
            yc[...] = first
            return
        if wide is not None:  # scaled in float32 too: one rounding to the 16-bit type
            acc = first.astype(wide)
            for v in views:
                fold(acc, v, out=acc)
            acc *= acc.dtype.type(scale)
            yc[...] = acc
            return
        fold(first, next(views), out=yc)
        for v in views:
            fold(yc, v, out=yc)
        if scale != 1.0:
            yc *= yc.dtype.type(scale)

    _over_batch(run, x, geom)
    return y, xpad


def _over_batch(run: Any, x: Any, geom: ConvGeometry) -> None:
    """``run(a, b)`` over chunks of the batch, on parallel threads when the batch is large.

    Elementwise work: the result is bitwise the same however the batch is split. The work
    counted is what an im2col pooling would copy (input elements times window size).
    """
    work = volume(x.shape[1:]) * geom.kernel_volume
    over_batch(run, x.shape[0], work, on_gpu=is_gpu_array(x))


def max_pool_forward(x: Any, geom: ConvGeometry) -> tuple[Any, PoolState]:
    """Max over each window; padding never wins. Returns ``(y, state)``; state feeds backward.

    NaN propagates, as in PyTorch.
    """
    xp = get_array_module(x)
    out = check_pool_shapes(x.shape, geom)
    windows = xp.empty((geom.kernel_volume, *x.shape[:2], *out), dtype=x.dtype)
    y = xp.empty(windows.shape[1:], dtype=x.dtype)
    if _gathers(x.shape, x, geom):
        gather = _tile_gather(x.shape, geom.ksize)
        np.take(x, gather, out=windows.reshape(-1), mode="wrap")  # wrap: no checks, in range
        np.max(windows, axis=0, out=y)
        return y, PoolState(windows, y)
    xpad = pad_spatial(x, geom.pad, float("-inf"))

    def run(a: int, b: int) -> None:
        for k, v in enumerate(_offset_views(xpad[a:b], geom, out)):
            windows[k, a:b] = v
        if geom.kernel_volume == 1:
            y[a:b] = windows[0, a:b]
            return
        xp.maximum(windows[0, a:b], windows[1, a:b], out=y[a:b])
        for k in range(2, geom.kernel_volume):
            xp.maximum(y[a:b], windows[k, a:b], out=y[a:b])

    _over_batch(run, x, geom)
    return y, PoolState(windows, y)


def _grad_buffer(
    dx: Any, dy: Any, geom: ConvGeometry, x_shape: tuple[int, ...]
) -> tuple[Any, bool]:
    """Where the per-offset gradients go: ``(buffer, write)``; ``write`` means assign, not add.

    Assigning is right only into a fresh buffer whose every element one view covers once.
    """
    xp = get_array_module(dy)
    if dx is None and tiles_exactly(geom, tuple(x_shape[2:])):
        return xp.empty(tuple(x_shape), dtype=dy.dtype), True
    if any(geom.pad):
        padded = tuple(n + 2 * p for n, p in zip(x_shape[2:], geom.pad))
        return xp.zeros((*x_shape[:2], *padded), dtype=dy.dtype), False
    if dx is None:
        dx = xp.zeros(tuple(x_shape), dtype=dy.dtype)
    return dx, False


def _finish(buf: Any, dx: Any, geom: ConvGeometry, x_shape: tuple[int, ...]) -> Any:
    """Crop the padding off ``buf`` and add it into ``dx`` (when given); the input gradient."""
    if not any(geom.pad):
        return buf
    inner = buf[_ALL2 + tuple(slice(p, p + n) for p, n in zip(geom.pad, x_shape[2:]))]
    if dx is None:
        return get_array_module(buf).ascontiguousarray(inner)
    dx += inner
    return dx


def max_pool_backward(
    dy: Any, state: PoolState, geom: ConvGeometry, x_shape: tuple[int, ...], dx: Any = None
) -> Any:
    """Route each output gradient to the first window position that holds the maximum.

    Args:
        dy: ``(N, C, *out)`` output gradient.
        state: from :func:`max_pool_forward`.
        geom: the pooling's geometry.
        x_shape: the input's shape.
        dx: an input gradient to add into, or None for a new array.

    Returns:
        The input gradient: ``dx`` with the result added, or a new array.
    """
    check_pool_shapes(x_shape, geom, dy.shape)
    in_size = tuple(x_shape[2:])
    if sum_dtype(dy.dtype) is not None and not tiles_exactly(geom, in_size):
        # an element that is the maximum of many overlapping windows takes each one's gradient:
        # added in bfloat16, 1024 windows' ones came to 256
        return _in_float32(lambda g: max_pool_backward(g, state, geom, x_shape), dy, dx)
    if _gathers(x_shape, dy, geom, backward=True):
        return _max_pool_backward_gathered(dy, state, geom, tuple(x_shape), in_size, dx)
    buf, write = _grad_buffer(dx, dy, geom, x_shape)
    out = tuple(dy.shape[2:])

    def run(a: int, b: int) -> None:
        dyc, windows, y = dy[a:b], state.windows[:, a:b], state.y[a:b]
        rare = RareWindows.find(windows, y, dyc, geom, in_size)
        scratch = get_array_module(dy).empty(dyc.shape, dtype=dy.dtype)
        maxima = _first_maxima(windows, y, geom, rare)
        for hit, gv in zip(maxima, _offset_views(buf[a:b], geom, out)):
            _masked(dyc, hit, rare, out=scratch)
            if write:
                gv[...] = scratch
            else:
                gv += scratch

    _over_batch(run, dy, geom)
    return _finish(buf, dx, geom, x_shape)


def _max_pool_backward_gathered(
    dy: Any,
    state: PoolState,
    geom: ConvGeometry,
    x_shape: tuple[int, ...],
    in_size: tuple[int, ...],
    dx: Any,
) -> Any:
    """:func:`max_pool_backward` of a tiling pooling on a small map: every offset's mask and
    gradient at once, then one ``take`` back through :func:`_tile_scatter`."""
    rare = RareWindows.find(state.windows, state.y, dy, geom, in_size)
    hits = np.empty(state.windows.shape, dtype=bool)
    for _ in _first_maxima(state.windows, state.y, geom, rare, hits):
        pass
    grads = np.empty(state.windows.shape, dtype=dy.dtype)
    _masked(dy, hits, rare, out=grads)
    scatter = _tile_scatter(x_shape, geom.ksize)
    if dx is None:
        dx = np.empty(x_shape, dtype=dy.dtype)
        np.take(grads, scatter, out=dx.reshape(-1), mode="wrap")  # wrap: no checks, in range
    else:
        dx += np.take(grads, scatter, mode="wrap").reshape(x_shape)
    return dx


def _first_maxima(
    windows: Any, y: Any, geom: ConvGeometry, rare: RareWindows | None, hits: Any = None
) -> Iterator[Any]:
    """Offset by offset, a mask of the windows whose gradient that offset's element takes:
    the first maximum, as PyTorch picks (see :class:`RareWindows`).

    Each mask goes into ``hits[k]`` when ``hits`` is given (``(K, N, C, *out)``), else into
    one buffer that every offset reuses: a GPU runs the whole batch as one chunk, where K
    masks at once would cost K times the memory.
    """
    xp = get_array_module(y)
    buffer = xp.empty(y.shape, dtype=bool) if hits is None else None
    free = None  # windows whose maximum no earlier offset has claimed (ties: first wins)
    last = geom.kernel_volume - 1
    for k in range(geom.kernel_volume):
        hit = buffer if hits is None else hits[k]
        xp.equal(windows[k], y, out=hit)
        if rare is not None:
            rare.restrict(hit, k)
        if free is None:
            free = ~hit
        else:
            xp.logical_and(hit, free, out=hit)
            if k < last:
                xp.logical_xor(free, hit, out=free)
        if rare is not None:
            rare.route_nan(hit, k)
        yield hit


def _masked(dy: Any, hit: Any, rare: RareWindows | None, out: Any) -> None:
    """``out = dy`` where ``hit``, 0 elsewhere: a product, unless ``dy`` holds an inf or NaN
    (``inf * 0`` is NaN, where PyTorch leaves 0): then masked copies."""
    xp = get_array_module(dy)
    if rare is None or not rare.bad_dy:
        xp.multiply(dy, hit, out=out)
        return
    xp.copyto(out, dy, where=hit)
    xp.copyto(out, 0, where=~hit)


def avg_pool_forward(x: Any, geom: ConvGeometry) -> Any:
    """Mean over each window, padding counted as zeros (PyTorch's ``count_include_pad=True``)."""
    return _fold(x, geom, 0.0, "add", 1.0 / geom.kernel_volume)[0]


def avg_pool_backward(dy: Any, geom: ConvGeometry, x_shape: tuple[int, ...], dx: Any = None) -> Any:
    """Spread each output gradient evenly over its window; adds into ``dx`` when given."""
    check_pool_shapes(x_shape, geom, dy.shape)
    if sum_dtype(dy.dtype) is not None and not tiles_exactly(geom, tuple(x_shape[2:])):
        # windows that overlap add up to K shares into one element, in float32: bfloat16's
        # stopped growing (32x32 windows at stride 1 of ones gave 0.25 where 1 is right)
        return _in_float32(lambda g: avg_pool_backward(g, geom, x_shape), dy, dx)
    buf, write = _grad_buffer(dx, dy, geom, x_shape)
    share = dy * dy.dtype.type(1.0 / geom.kernel_volume)
    for gv in _offset_views(buf, geom, tuple(dy.shape[2:])):
        if write:
            gv[...] = share
        else:
            gv += share
    return _finish(buf, dx, geom, x_shape)


def _in_float32(backward: Any, dy: Any, dx: Any) -> Any:
    """``backward`` of a 16-bit ``dy`` in float32, rounded to ``dy``'s type once: into a new
    array, or added into ``dx`` (in place) when given."""
    g = backward(widened(dy))
    if dx is None:
        return g.astype(dy.dtype)
    dx += g
    return dx
