"""Which layout a CPU convolution runs in: the cost model, the opt-in autotuner, the dense rule.

:mod:`distconv.kernels.conv` computes; this module only chooses. A chunk of samples runs either
*per sample* (one matrix product per sample) or *batched* (one product over the chunk's columns
side by side); the input gradient of a convolution on tiny images may instead go by one dense
product. Every choice depends on the shapes alone, so results are bitwise reproducible, unless
``DISTCONV_AUTOTUNE=1`` asks for timed choices.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from distconv.backend import is_gpu_array
from distconv.kernels.parallel import over_batch, shares_out
from distconv.kernels.shape import ConvGeometry, volume

#: the batched layout pays where a sample's own matrix product is small: at most this many
#: output positions per sample (a 28x28 image; with the batch innermost, batched ran 0.15-0.2x
#: per sample's time at 4x4, 0.6 at 14x14, even at 28x28 and 1.15x at 32x32) ...
BATCHED_MAX_POSITIONS = 784
#: ... and at least this many rows (C/G * kernel volume) in the column matrix, so that one
#: product over the chunk earns back the transposes around it (measurements:
#: docs/benchmarks-history.md)
BATCHED_MIN_ROWS = 32
#: ... or, grouped (a depthwise convolution: ``C/G * K`` = 9 rows), at most this many output
#: positions: per sample, a chunk runs ``B * G`` products of a few thousand multiply-adds each,
#: each call's cost outweighing its work. Depthwise 3x3, N32, one thread, batched against per
#: sample: 0.33-0.39x the time at 7x7 (C256), 0.51-0.65x at 14x14 (C16-C128; two channels a
#: group 0.66-0.70x), 1.44-1.58x at 20x20 and 1.4-2.3x at 28x28: the limit lies in 196-399.
#: In 3-D (3x3x3, N16, C32-C128) 0.36-0.64x at 3^3 to 5^3, even at 6^3
GROUPED_BATCHED_MAX_POSITIONS = 196
#: ... and only in 2-D and 3-D with at least this many rows: forward + backward, N32 C64, one
#: thread, batched against per sample (2026-12-07, the Zen 5 machine): 2-D 1x1 at 14x14 with
#: 4 and 8 rows (16 and 8 groups) 2.3x the time, a 2x2 depthwise (4 rows) 1.26x, where 1x1
#: with 16 rows ran 0.24x at 7x7 and 0.68x at 14x14; 1-D depthwise k3, k5, k9 at length 128
#: 1.2-1.8x, three rows of k3 at length 32 1.3x, twelve (16 groups) 2.0x; only k31 (C256,
#: length 128) about even (0.93x)
GROUPED_BATCHED_MIN_ROWS = 9

#: the autotuner's choices, ``(direction, x shape, w shape, geometry, dtype) -> batched``
_tuned: dict[tuple, bool] = {}


def use_batched(out: tuple[int, ...], rows: int, direction: str, groups: int = 1) -> bool:
    """The cost model: whether ``direction`` (``fwd``, ``dw``, ``dx``) uses the batched layout.

    Per sample, a chunk of ``B`` samples costs ``B * groups`` products ``(O/G) x rows x L``
    with ``rows = C/G * K``; batched, ``groups`` products ``(O/G) x rows x L*B`` plus a
    transposed copy of each side. The choice depends on the shapes alone (never on timings or
    thread counts), so a run's results are bitwise the same everywhere. The three directions
    share the rule today; ``direction`` is where they would part.
    """
    del direction
    positions = volume(out)
    if positions > BATCHED_MAX_POSITIONS:
        return False
    grouped = groups > 1 and len(out) >= 2 and rows >= GROUPED_BATCHED_MIN_ROWS
    return rows >= BATCHED_MIN_ROWS or (grouped and positions <= GROUPED_BATCHED_MAX_POSITIONS)


def autotune_enabled() -> bool:
    """``DISTCONV_AUTOTUNE=1``: time both layouts once per shape and keep the faster.

    Like cuDNN's benchmark mode this trades bitwise reproducibility for speed: the choice
    depends on timings, and the two layouts sum in different orders.
    """
    value = os.environ.get("DISTCONV_AUTOTUNE", "0")
    if value not in ("0", "1", ""):
        raise ValueError(f"DISTCONV_AUTOTUNE must be 0 or 1, got {value!r}")
    return value == "1"


def run_chunks(
    run: Callable[[int, int, bool], Any],
    direction: str,
    x: Any,
    w: Any,
    geom: ConvGeometry,
    work: int,
) -> list[Any]:
    """``run(a, b, batched)`` over the batch's chunks, in the layout the cost model picks.

    With the autotuner on, the first call of a shape runs both layouts, timed, and remembers
    the faster; either run's results are right, so the last one is returned. Each layout runs
    twice, in the order A B B A, and keeps its better time, so neither pays alone for a cold
    cache or a first allocation; the first call then returns the chosen layout's result, so it
    is bitwise what later calls of the shape give.
    """
    on_gpu = is_gpu_array(x)
    n = x.shape[0]
    out = geom.out_size(x.shape[2:]) if direction != "dx" else tuple(x.shape[2:])
    rows = w.shape[1] * geom.kernel_volume

    def go(batched: bool) -> list[Any]:
        return over_batch(lambda a, b: run(a, b, batched), n, work, on_gpu=on_gpu)

    if on_gpu or not autotune_enabled():
        return go(use_batched(out, rows, direction, geom.groups))
    key = (direction, tuple(x.shape), tuple(w.shape), geom, str(x.dtype))
    if key in _tuned:
        return go(_tuned[key])
    times = {False: float("inf"), True: float("inf")}
    for batched in (False, True, True, False):
        start = time.perf_counter()
        result = go(batched)
        times[batched] = min(times[batched], time.perf_counter() - start)
    _tuned[key] = best = min(times, key=times.get)
    # the first call returns what later calls will: the chosen layout's own result
    return result if best is False else go(best)


#: the dense form multiplies by every (output, input) pixel pair, ``in/K`` times the work of
#: im2col: worth it only up to this ratio, where it saves all of col2im's copies and adds
DENSE_MAX_WORK_RATIO = 2
#: and only while the dense matrix ``(O*out, C*in)`` stays small (elements)
DENSE_MAX_ELEMENTS = 1 << 22
#: building the matrix is a fixed cost, and since batched columns put the batch innermost the
#: column route beats the dense product until the dense product is large enough to split over
#: two kernel threads (parallel.matmul: 64 rows a chunk). LeNet's conv2 at 4x4, col2im route
#: over dense, two threads: 0.65-0.69x the time at N32, 0.80-0.94x at N64, 1.19-1.48x at
#: N128; on one thread about even at N128 (0.91-1.08x), but the choice may depend on shapes
#: only (docs/benchmarks.md, "Why the constants are what they are")
DENSE_MIN_BATCH = 128


def dense_pays(
    n: int,
    out: tuple[int, ...],
    in_size: tuple[int, ...],
    w_shape: tuple[int, ...],
    geom: ConvGeometry,
) -> bool:
    """Whether the input gradient of a convolution on tiny images goes by one dense product.

    On a 4x4 image a 3x3 kernel touches most of the input from every output pixel, so the
    convolution is nearly a dense matrix: ``dx = dy @ M`` with ``M`` of shape
    ``(O*out, C*in)`` needs no column copies at all. Shapes alone decide, so results stay
    bitwise reproducible.
    """
    o, cg = w_shape[:2]
    return (
        geom.groups == 1
        and n >= DENSE_MIN_BATCH
        and volume(in_size) <= DENSE_MAX_WORK_RATIO * geom.kernel_volume
        and o * volume(out) * cg * volume(in_size) <= DENSE_MAX_ELEMENTS
    )


#: a convolution's input and weight gradients run side by side (:func:`gradients_beside`)
#: from this many multiply-adds each: below it the second thread's wake-up and the GIL's
#: hand-offs cost more than the overlap saves. LeNet's conv2 at 4x4, 2 threads, side by side
#: against one after the other: 1.00-1.11x the time at batch 16 (4.7 M each), 0.86-0.89x at 32
#: (9.4 M), 0.81-0.85x at 64; 0.63-0.66x at 14x14 and batch 16 (docs/benchmarks.md, "Why the
#: constants are what they are")
BESIDE_MIN_MACS = 1 << 23


def gradients_beside(
    x_shape: tuple[int, ...],
    w_shape: tuple[int, ...],
    out: tuple[int, ...],
    geom: ConvGeometry,
    on_gpu: bool,
) -> bool:
    """Whether a convolution's two gradients run side by side on two threads.

    They do on the CPU where neither would be split over the threads, so that each alone
    would keep one core busy: the batch is not shared out (:func:`~distconv.kernels.parallel.
    shares_out`; every input-gradient route's work is at most the columns' here) and the input
    gradient does not go by the dense product, which splits itself. And each must be at least
    :data:`BESIDE_MIN_MACS` multiply-adds. Which gradient runs where changes no bits, so this
    choice may depend on the thread count.

    Args:
        x_shape: the input's shape ``(N, C, *sp)``.
        w_shape: the weight's, ``(O, C/G, *k)``.
        out: the output's spatial size.
        on_gpu: cupy arrays, where the device is parallel already.
    """
    n = x_shape[0]
    work = x_shape[1] * geom.kernel_volume * volume(out)  # column elements a sample
    macs = n * work * (w_shape[0] // geom.groups)
    return (
        not on_gpu
        and macs >= BESIDE_MIN_MACS
        and not shares_out(n, work)
        and not dense_pays(n, out, tuple(x_shape[2:]), w_shape, geom)
    )
