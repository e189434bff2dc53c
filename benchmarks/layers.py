"""Activation, loss, sequence-pool and convolution layers against PyTorch, forward + backward,
float32.

Usage: ``python benchmarks/layers.py [--threads 1] [--rounds 3] [--clock cpu|wall]
[--cases NAME ...] [--baseline CHECKOUT]``

Each case is one layer alone, its output's gradient all ones (a loss's 1), distconv's process
keeping freed memory mapped as ``distconv train``'s does. The processes take turns, one per
library and round: this checkout's distconv, the distconv of ``--baseline`` (a checkout of
older code) where given, then PyTorch. Each figure is the median over the rounds of
a process's best of 25 calls. Prints distconv / PyTorch (lower is better) and, with
``--baseline``, distconv / baseline: the change against the older code, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (  # noqa: E402
    at_least,
    best_ms,
    blas_kernels,
    print_table,
    run_worker,
    torch_or_say,
)

#: name: (layer, its option, shape); a sequence pool's shape is (sequences, length, width),
#: every sequence of one length: PyTorch's best case, one reduction over a view; a
#: convolution's option is (output channels, kernel, stride, padding, groups), its shape the
#: input's (N, C, H, W), 3x3 kernels throughout
CASES = {
    "sigmoid 64x32768": ("activation", "sigmoid", (64, 32768)),
    "relu 64x32768": ("activation", "relu", (64, 32768)),
    "softmax 64x1000": ("activation", "softmax", (64, 1000)),
    "softmax 64x32768": ("activation", "softmax", (64, 32768)),
    "cross-entropy 64x1000": ("cross-entropy", None, (64, 1000)),
    "cross-entropy 64x10000": ("cross-entropy", None, (64, 10000)),
    "seqpool average 32x20x128": ("seqpool", "average", (32, 20, 128)),
    "seqpool sum 32x20x128": ("seqpool", "sum", (32, 20, 128)),
    "seqpool max 32x20x128": ("seqpool", "max", (32, 20, 128)),
    "depthwise N32 C256 7x7 p1": ("conv", (256, 3, 1, 1, 256), (32, 256, 7, 7)),
    "depthwise N32 C128 14x14 p1": ("conv", (128, 3, 1, 1, 128), (32, 128, 14, 14)),
    "depthwise N32 C64 28x28 p1": ("conv", (64, 3, 1, 1, 64), (32, 64, 28, 28)),
    "depthwise N32 C256 14x14 s2 p1": ("conv", (256, 3, 2, 1, 256), (32, 256, 14, 14)),
    "depthwise N32 C64 28x28 s2 p1": ("conv", (64, 3, 2, 1, 64), (32, 64, 28, 28)),
    "conv N64 C8 8x8 K16 p1": ("conv", (16, 3, 1, 1, 1), (64, 8, 8, 8)),
    "conv N128 C4 8x8 K8 p1": ("conv", (8, 3, 1, 1, 1), (128, 4, 8, 8)),
    "conv N32 C3 14x14 K8 p1": ("conv", (8, 3, 1, 1, 1), (32, 3, 14, 14)),
    "conv N64 C16 14x14 K16 p1": ("conv", (16, 3, 1, 1, 1), (64, 16, 14, 14)),
}
#: calls timed per case and process (the best is kept)
REPEAT = 25


def _inputs(case: tuple) -> tuple:
    """The case's float32 values and, for a loss, its label ids: the same for every library."""
    import numpy as np

    kind, _, shape = case
    rng = np.random.default_rng(0)
    if kind == "seqpool":
        n, length, width = shape
        return rng.standard_normal((n * length, width)).astype(np.float32), None
    ids = rng.integers(0, shape[1], shape[0]) if kind == "cross-entropy" else None
    return (rng.standard_normal(shape) * 3).astype(np.float32), ids


def _distconv_step(case: tuple):
    import numpy as np

    from distconv import Arg
    from distconv.layers import Activation, Conv2D, SequencePool, SoftmaxCrossEntropy

    kind, option, shape = case
    values, ids = _inputs(case)
    starts = np.arange(0, len(values) + 1, shape[1]) if kind == "seqpool" else None
    x = Arg(values, needs_grad=True, seq_starts=starts)
    if kind == "activation":
        layer, inputs = Activation(option), [x]
    elif kind == "conv":
        out, k, stride, pad, groups = option
        layer, inputs = Conv2D(shape[1], out, k, stride, pad, groups=groups), [x]
    elif kind == "cross-entropy":
        layer, inputs = SoftmaxCrossEntropy(), [x, Arg(ids=ids, needs_grad=False)]
    else:
        layer, inputs = SequencePool(option), [x]

    def step() -> None:
        x.grad = None
        y = layer(*inputs)
        y.grad = 1.0 if kind == "cross-entropy" else np.ones_like(y.value)
        layer.backward(lambda p: None)

    return step


def _torch_step(case: tuple):
    import torch
    import torch.nn.functional as F

    kind, option, shape = case
    values, ids = _inputs(case)
    x = torch.from_numpy(values).requires_grad_()
    if kind == "activation":
        op = {"sigmoid": torch.sigmoid, "relu": torch.relu, "softmax": torch.softmax}[option]
        forward = lambda: op(x, 1) if option == "softmax" else op(x)  # noqa: E731
    elif kind == "cross-entropy":
        labels = torch.from_numpy(ids)
        forward = lambda: F.cross_entropy(x, labels)  # noqa: E731
    elif kind == "conv":
        out, k, stride, pad, groups = option
        w = torch.randn(out, shape[1] // groups, k, k, requires_grad=True)
        b = torch.zeros(out, requires_grad=True)
        forward = lambda: F.conv2d(x, w, b, stride, pad, groups=groups)  # noqa: E731
    else:
        n, length, width = shape
        reduce = {"average": torch.mean, "sum": torch.sum, "max": torch.amax}[option]
        forward = lambda: reduce(x.view(n, length, width), 1)  # noqa: E731

    def step() -> None:
        x.grad = None
        y = forward()
        y.backward(torch.ones_like(y))

    return step


def worker(library: str, threads: int, names: list[str], clock: str) -> None:
    """Print one JSON line: each case's best forward + backward ms in this process."""
    if library == "torch":
        import torch

        torch.set_num_threads(threads)
    else:  # as `distconv train` starts: freed arrays stay mapped, not faulted in every call
        from distconv.allocator import keep_freed_memory

        keep_freed_memory()
    make = _torch_step if library == "torch" else _distconv_step
    result = {name: best_ms(make(CASES[name]), repeat=REPEAT, clock=clock) for name in names}
    print(json.dumps(result))


def _ratio(ms: float | None, base: float | None) -> str:
    return f"{ms / base:.2f}" if ms and base else "-"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=at_least(1, int), default=1)
    ap.add_argument("--rounds", type=at_least(1, int), default=3)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="cpu")
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--baseline", metavar="CHECKOUT", help="a checkout whose distconv to compare")
    ap.add_argument("--worker", choices=["distconv", "torch"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.threads, args.cases, args.clock)
        return
    if args.baseline and not os.path.isdir(os.path.join(args.baseline, "distconv")):
        ap.error(f"--baseline {args.baseline} holds no distconv/ package")
    have_torch = torch_or_say("printing distconv times only")
    print(f"# {blas_kernels()}")
    extra = ["--cases", *args.cases, "--clock", args.clock]
    runs: dict[str, list[dict]] = {"distconv": [], "baseline": [], "torch": []}
    for _ in range(args.rounds):  # the libraries take turns: a change of load hits them all
        runs["distconv"].append(run_worker(__file__, "distconv", args.threads, extra))
        if args.baseline:
            code = os.path.abspath(args.baseline)
            runs["baseline"].append(run_worker(__file__, "distconv", args.threads, extra, code))
        if have_torch:
            runs["torch"].append(run_worker(__file__, "torch", args.threads, extra))

    def median(who: str, name: str) -> float | None:
        return statistics.median(r[name] for r in runs[who]) if runs[who] else None

    rows = []
    for name in args.cases:
        ms, base, ref = (median(who, name) for who in ("distconv", "baseline", "torch"))
        rows.append(
            [name, f"{ms:.3f}", f"{base:.3f}" if base else "-", _ratio(ms, base)]
            + [f"{ref:.3f}" if ref else "-", _ratio(ms, ref)]
        )
    print(
        f"# forward + backward, float32, {args.threads} thread(s), {args.clock} clock, median "
        f"over {args.rounds} alternated processes of each one's best of {REPEAT} calls"
    )
    header = ["case", "distconv ms", "baseline ms", "vs baseline", "torch ms", "vs torch"]
    print_table(header, rows)


if __name__ == "__main__":
    main()
