"""Conv2D / ConvTranspose3D speed against PyTorch on the CPU, one process per library.

Usage: ``python benchmarks/conv.py [--threads 1 2] [--cases NAME ...] [--clock wall|cpu]``

Prints, for each shape and thread count, the best-of-N time of forward and of forward+backward
(input, weight and bias gradients), GFLOP/s, and the ratio distconv / PyTorch (lower is better).
"""

from __future__ import annotations

import argparse
import json
import os
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

# name: (kind, N, C, spatial, O, k, stride, pad)
CASES = {
    "ref N64 C3 28^2 K4 3x3": ("conv2d", 64, 3, (28, 28), 4, 3, 1, 0),
    "lenet conv1 N64 C1 28^2 K6 5x5": ("conv2d", 64, 1, (28, 28), 6, 5, 1, 0),
    "lenet conv2 N64 C6 12^2 K16 5x5": ("conv2d", 64, 6, (12, 12), 16, 5, 1, 0),
    "N32 C64 56^2 K64 3x3 p1": ("conv2d", 32, 64, (56, 56), 64, 3, 1, 1),
    "lenet3 conv2 N64 C32 14^2 K64 3x3 p1": ("conv2d", 64, 32, (14, 14), 64, 3, 1, 1),
    "lenet3 conv2 N64 C32 4^2 K64 3x3 p1": ("conv2d", 64, 32, (4, 4), 64, 3, 1, 1),
    "N32 C32 32^2 K64 3x3 s2 p1": ("conv2d", 32, 32, (32, 32), 64, 3, 2, 1),
    "deconv3d N4 C8 16^3 K8 3^3 s2 p1": ("deconv3d", 4, 8, (16, 16, 16), 8, 3, 2, 1),
}


def flops(case: tuple) -> float:
    """Multiply-adds x 2 of the forward pass."""
    kind, n, c, sp, o, k, s, p = case
    nd = len(sp)
    if kind == "deconv3d":  # a transposed conv costs what its adjoint conv costs
        vol = 1
        for x in sp:
            vol *= x
        return 2.0 * n * c * vol * o * k**nd
    out = 1
    for x in sp:
        out *= (x + 2 * p - k) // s + 1
    return 2.0 * n * o * out * c * k**nd


def _distconv_case(case: tuple):
    import numpy as np

    from distconv import Arg
    from distconv.layers import Conv2D, ConvTranspose3D

    kind, n, c, sp, o, k, s, p = case
    rng = np.random.default_rng(0)
    cls = Conv2D if kind == "conv2d" else ConvTranspose3D
    layer = cls(c, o, k, stride=s, padding=p)
    x = Arg(rng.standard_normal((n, c, *sp)).astype(np.float32))
    noop = lambda p: None  # noqa: E731

    def fwd():
        return layer(x)

    def fwd_bwd():
        y = layer(x)
        y.grad = np.ones_like(y.value)
        x.grad = None
        layer.backward(noop)

    return fwd, fwd_bwd


def _torch_case(case: tuple):
    import torch
    import torch.nn.functional as F

    kind, n, c, sp, o, k, s, p = case
    x = torch.randn(n, c, *sp, requires_grad=True)
    if kind == "conv2d":
        w = torch.randn(o, c, k, k, requires_grad=True)

        def op():
            return F.conv2d(x, w, b, stride=s, padding=p)
    else:
        w = torch.randn(c, o, k, k, k, requires_grad=True)

        def op():
            return F.conv_transpose3d(x, w, b, stride=s, padding=p)

    b = torch.zeros(o, requires_grad=True)

    def fwd():
        with torch.no_grad():
            return op()

    def fwd_bwd():
        y = op()
        y.backward(torch.ones_like(y))

    return fwd, fwd_bwd


def worker(library: str, threads: int, names: list[str], clock: str = "wall") -> None:
    if library == "torch":
        import torch

        torch.set_num_threads(threads)
    make = _torch_case if library == "torch" else _distconv_case
    result = {}
    for name in names:
        fwd, fwd_bwd = make(CASES[name])
        result[name] = {
            "fwd": best_ms(fwd, clock=clock),
            "fwd_bwd": best_ms(fwd_bwd, clock=clock),
        }
    print(json.dumps(result))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=at_least(1, int), nargs="+", default=[1, 2])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    ap.add_argument("--worker", choices=["distconv", "torch"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.threads[0], args.cases, args.clock)
        return
    have_torch = torch_or_say("printing distconv times only")
    print(f"# {blas_kernels()}")
    rows = []
    for t in args.threads:
        extra = ["--cases", *args.cases, "--clock", args.clock]
        ours = run_worker(__file__, "distconv", t, extra)
        ref = run_worker(__file__, "torch", t, extra) if have_torch else {}
        for name in args.cases:
            gf = flops(CASES[name]) / 1e9
            for phase, mult in (("fwd", 1), ("fwd_bwd", 3)):
                ms = ours[name][phase]
                r = ref.get(name, {}).get(phase)
                rows.append(
                    [
                        name,
                        t,
                        phase,
                        f"{ms:.1f}",
                        f"{gf * mult / ms * 1e3:.1f}",
                        f"{r:.1f}" if r else "-",
                        f"{ms / r:.2f}" if r else "-",
                    ]
                )
    print_table(["case", "threads", "phase", "distconv ms", "GFLOP/s", "torch ms", "ratio"], rows)


if __name__ == "__main__":
    main()
