"""SelectiveFullyConnected against a dense FullyConnected of the same size, forward + backward.

Usage: ``python benchmarks/selective_fc.py [--batch 64] [--in-features 256] [--threads 2]``

For 1%, 10% and 100% of 4096 outputs selected per sample (random columns), prints the time of
the sparse path (gather the selected weight rows), the dense path (full product, then pick) and
what ``method="auto"`` chooses, each as a ratio to the dense layer measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import at_least, best_ms, print_table  # noqa: E402

OUT = 4096


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=at_least(1, int), default=64)
    ap.add_argument("--in-features", type=at_least(1, int), default=256)
    ap.add_argument("--threads", type=at_least(1, int), default=2)
    args = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "DISTCONV_NUM_THREADS"):
        os.environ[var] = str(args.threads)  # before numpy is imported

    import numpy as np

    from distconv import Arg
    from distconv.layers import FullyConnected, SelectiveFullyConnected

    rng = np.random.default_rng(0)
    n, d = args.batch, args.in_features
    x = Arg(rng.standard_normal((n, d)).astype(np.float32))
    noop = lambda p: None  # noqa: E731

    def step(layer, *inputs):
        def run():
            y = layer(*inputs)
            y.grad = np.ones_like(y.value)
            x.grad = None
            layer.backward(noop)

        return run

    dense_ms = best_ms(step(FullyConnected(d, OUT), x))
    rows = [["dense FC", "-", f"{dense_ms:.2f}", "1.00"]]
    for frac in (0.01, 0.10, 1.00):
        k = max(1, int(round(frac * OUT)))
        cols = np.argsort(rng.random((n, OUT)), axis=1)[:, :k]
        sel = Arg(ids=cols, needs_grad=False)
        for method in ("sparse", "dense", "auto"):
            layer = SelectiveFullyConnected(d, OUT, method=method)
            ms = best_ms(step(layer, x, sel), repeat=5)
            rows.append([f"{frac:.0%} selected", method, f"{ms:.2f}", f"{ms / dense_ms:.2f}"])
    print(f"batch {n}, {d} -> {OUT}, float32, {args.threads} threads, forward + backward")
    print_table(["case", "method", "ms", "vs dense FC"], rows)


if __name__ == "__main__":
    main()
