"""SelectiveFullyConnected against a dense FullyConnected of the same size, forward + backward.

Usage: ``python benchmarks/selective_fc.py [--batch 64] [--in-features 256] [--threads 2]``

For 1%, 10% and 100% of 4096 outputs selected per sample (random columns), prints the time of
the sparse path (gather the selected weight rows), the dense path (full product, then pick) and
what ``method="auto"`` chooses, each as a ratio to the dense layer measured in the same run.

Then a parameter server's sparse push on the worker, for a ``sparse=True`` layer of 100 000 x
64 and 1 000 000 x 8 weights (the batch's samples selecting 8 columns each): finding the rows
to push and copying them for the wire, from the rows the layer's backward noted against a read
of the whole gradient (what every step did before, and what a table still takes where a layer
writes it without noting its rows), as a ratio in the same run. No shard is involved: the
step's wire time is another benchmark's.
"""

from __future__ import annotations

import argparse
import os
import sys
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import at_least, best_ms, print_table  # noqa: E402

OUT = 4096
#: (rows, columns) of the sparse push's tables, and the columns each sample selects there
PUSH_TABLES, PUSH_K = ((100_000, 64), (1_000_000, 8)), 8


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
    push_rows(n, rng)


def push_rows(n: int, rng) -> None:
    """Time the worker's rows of a sparse push (:data:`PUSH_TABLES`), after one real backward:
    from the rows the layer noted (as its backward notes them) against a read of the table
    (none noted: the sync's own scan)."""
    import numpy as np

    from distconv import Arg
    from distconv.layers import SelectiveFullyConnected
    from distconv.layers.written_rows import note_rows, open_rows
    from distconv.sync.ps.sparse import CHECK_ROWS_VARIABLE, rows_with_gradient

    rows = []
    for out, width in PUSH_TABLES:
        layer = SelectiveFullyConnected(width, out, bias=False, sparse=True)
        x = Arg(rng.standard_normal((n, width)).astype(np.float32))
        cols = rng.integers(0, out, (n, PUSH_K))
        y = layer(x, Arg(ids=cols, needs_grad=False))
        y.grad = np.ones_like(y.value)
        w, used = layer.weight, np.unique(cols)  # the rows its backward writes and notes
        layer.backward(lambda p: None)

        def push(w=w, used=used, noted=True):
            if noted:
                open_rows(w)  # the step's start
                note_rows(w, used)  # the backward's note
            return w.grad[rows_with_gradient(w, w.grad)]  # the rows copied for the wire

        # the noted rows as a step takes them unchecked, whatever the caller's environment
        # holds (its value is back after): set, the check's own scan would be timed as theirs
        with mock.patch.dict(os.environ, {CHECK_ROWS_VARIABLE: "0"}):
            scan, noted = (best_ms(lambda v=v: push(noted=v), repeat=7) for v in (False, True))
        name = f"{out} x {width}"
        rows.append([name, "whole table (before)", f"{scan:.3f}", "1.00"])
        rows.append([name, "rows noted", f"{noted:.3f}", f"{noted / scan:.3f}"])
    print(f"sparse push rows, batch {n} x {PUSH_K} columns, float32")
    print_table(["table", "rows from", "ms", "vs before"], rows)


if __name__ == "__main__":
    main()
