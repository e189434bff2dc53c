"""ConvOperator (a filter bank per sample) against the per-sample matrix product it replaced.

Usage: ``python benchmarks/conv_operator.py [--threads 1 2] [--repeat 15] [--baseline CHECKOUT]
[--rounds 3]``

Until issue 7 the operator multiplied each sample's filters with that sample's im2col columns
itself (one batched matmul, plain col2im). It now runs on :mod:`distconv.kernels.conv_per_sample`
(chunks of samples on the kernel threads; on a GPU, cuDNN with ``groups = N * G``). This script
times forward + backward (image and filter gradients) of both on the same arrays, in the same
process, alternating the two so that load on a shared machine hits both alike, with the glibc
settings that keep freed memory mapped (``KEEP_MEMORY_ENV`` below). The baseline is
the old kernel work alone, without the layer around it, so it flatters the old code;
``--baseline`` below is the fair comparison. It prints the ratio baseline / operator
(higher is better; the issue's target is 2 on N16 C16 16x16 3x3). With PyTorch importable it
also times ``F.conv2d`` with ``groups = N * G``, the same computation, in its own process.

``--baseline DIR`` (``--then``, its old name) times the layer itself against the layer of
another checkout (the code as it was when issue 7 was filed: ``git worktree add DIR
6b855cf``): each in its own processes, alternated round by round, both with the same glibc
settings that keep freed memory mapped (``MALLOC_*`` below: like ``distconv.allocator``, whose
settings differ but which the old code lacks; with these no step page-faults either way), so
that only the code differs. Each worker reports the file it imported and a checksum of its
results, and the two sides must agree.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (  # noqa: E402
    REPO_ROOT,
    at_least,
    best_ms,
    blas_kernels,
    print_table,
    run_worker,
    torch_or_say,
)

# name: (N, C, O, size, kernel, padding, groups)
CASES = {
    "N16 C16 16^2 K16 3x3 p1": (16, 16, 16, 16, 3, 1, 1),
    "N16 C16 16^2 K16 3x3 p1 g2": (16, 16, 16, 16, 3, 1, 2),
    "N32 C8 28^2 K8 5x5 p2": (32, 8, 8, 28, 5, 2, 1),
}


def _baseline(x, f, dout, case):
    """The operator before issue 7: im2col, one matmul per sample and group, plain col2im."""
    import numpy as np

    from distconv.kernels.im2col import col2im, im2col_view
    from distconv.kernels.shape import ConvGeometry

    n, c, o, size, k, p, g = case
    geom = ConvGeometry.make(2, k, 1, p, 1, g)
    out = geom.out_size((size, size))

    def columns():
        images = x.reshape(n, c, size, size)
        col = im2col_view(images, geom).reshape(n, g, -1, out[0] * out[1])
        return images, col, f.reshape(n, g, o // g, -1)

    def step():
        _, col, w = columns()
        y = np.matmul(w, col).reshape(n, -1)
        images, col, w = columns()  # backward rebuilt the columns, as the operator did
        dy = dout.reshape(n, g, o // g, -1)
        dw = np.matmul(dy, col.swapaxes(-1, -2))
        dcol = np.matmul(w.swapaxes(-1, -2), dy).reshape(n, c, k, k, *out)
        dx = col2im(dcol, images.shape, geom)
        return y, dx, dw

    return step


#: glibc settings by environment that keep freed memory mapped, obeyed by code that predates
#: ``distconv.allocator`` too (a large top pad: steps reuse their pages instead of faulting)
KEEP_MEMORY_ENV = {"MALLOC_TRIM_THRESHOLD_": "4294967296", "MALLOC_TOP_PAD_": "268435456"}


def operator_step(x, f, dout, case):
    from distconv import Arg
    from distconv.layers import ConvOperator, Mixed

    n, c, o, size, k, p, g = case
    if list(inspect.signature(ConvOperator).parameters)[2] == "kernel_size":
        op = ConvOperator(c, o, k, input_size=size, padding=p, groups=g)
    else:  # the signature before issue 7: (C, O, input_size, kernel_size)
        op = ConvOperator(c, o, size, k, padding=p, groups=g)
    layer = Mixed([None, None], [op])
    image, filters = Arg(x), Arg(f)

    def step():
        image.grad = filters.grad = None
        y = layer(image, filters)
        y.grad = dout
        layer.backward(lambda param: None)
        return y.value, image.grad, filters.grad

    return step


def _best_pair(a, b, repeat: int) -> tuple[float, float]:
    """Best-of-``repeat`` milliseconds of ``a`` and ``b``, timed alternately after a warm-up."""
    a(), b()
    best = [float("inf"), float("inf")]
    for _ in range(repeat):
        for i, fn in enumerate((a, b)):
            t = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t)
    return best[0] * 1e3, best[1] * 1e3


def make_arrays(case):
    import numpy as np

    n, c, o, size, k, p, g = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c * size * size)).astype(np.float32)
    f = rng.standard_normal((n, o * (c // g) * k * k)).astype(np.float32)
    out = size + 2 * p - k + 1
    dout = rng.standard_normal((n, o * out * out)).astype(np.float32)
    return x, f, dout


def _torch_ms(case, repeat: int) -> float:
    import torch
    import torch.nn.functional as F

    n, c, o, size, k, p, g = case
    x, f, dout = (torch.from_numpy(a) for a in make_arrays(case))
    x = x.reshape(1, n * c, size, size).requires_grad_()
    w = f.reshape(n * o, c // g, k, k).requires_grad_()
    dy = dout.reshape(1, n * o, size + 2 * p - k + 1, -1)

    def step():
        x.grad = w.grad = None
        F.conv2d(x, w, None, 1, p, 1, n * g).backward(dy)

    step()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def worker(library: str, threads: int, repeat: int) -> None:
    import numpy as np

    result = {}
    for name, case in CASES.items():
        if library == "layer":  # the layer alone, in whichever checkout is on the path
            import distconv

            step = operator_step(*make_arrays(case), case)
            checksum = sum(float(np.abs(a).sum()) for a in step())
            result[name] = {"layer": best_ms(step, repeat), "checksum": checksum}
            result[name]["file"] = distconv.__file__
            continue
        if library == "torch":
            import torch

            torch.set_num_threads(threads)
            result[name] = {"torch": _torch_ms(case, repeat)}
            continue
        arrays = make_arrays(case)
        base, ours = _baseline(*arrays, case), operator_step(*arrays, case)
        for want, got in zip(base(), ours()):  # the same numbers, or the timing means nothing
            np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-3, atol=1e-3)
        b, o = _best_pair(base, ours, repeat)
        result[name] = {"baseline": b, "operator": o}
    print(json.dumps(result))


def _check_layer_result(
    v: dict, code: str | None, other: str | None, name: str, checks: dict
) -> None:
    """The worker imported the checkout it was meant to (not the other one, even where one
    lies inside the other), and computed what the other did."""
    root, other_root = (os.path.realpath(c or REPO_ROOT) for c in (code, other))
    imported = os.path.realpath(v["file"])
    nested_other = other_root.startswith(root + os.sep) and imported.startswith(other_root)
    if not imported.startswith(root + os.sep) or nested_other:
        raise SystemExit(f"a worker meant for {root} imported {v['file']}")
    want = checks.setdefault(name, v["checksum"])
    if abs(v["checksum"] - want) > 1e-4 * abs(want):
        raise SystemExit(f"{name}: the checkouts disagree ({v['checksum']} against {want})")


def against_then(then: str, threads: list[int], repeat: int, rounds: int) -> None:
    """The layer here against the layer in checkout ``then``: medians over alternated rounds."""
    if not os.path.isfile(os.path.join(then, "distconv", "__init__.py")):
        raise SystemExit(f"--baseline {then}: no distconv package there (a checkout's root?)")
    rows = []
    for t in threads:
        times: dict[str, dict[str, list[float]]] = {}
        checks: dict[str, float] = {}
        for r in range(rounds):
            order = ("then", "now") if r % 2 == 0 else ("now", "then")
            for which in order:
                code = then if which == "then" else None
                kwargs = {"code": code} if code else {}
                got = run_worker(
                    __file__,
                    "layer",
                    t,
                    ["--repeat", str(repeat)],
                    env_extra=KEEP_MEMORY_ENV,
                    **kwargs,
                )
                for name, v in got.items():
                    _check_layer_result(v, code, None if code else then, name, checks)
                    times.setdefault(name, {}).setdefault(which, []).append(v["layer"])
        for name, by in times.items():
            then_ms, now_ms = statistics.median(by["then"]), statistics.median(by["now"])
            rows.append([name, t, f"{then_ms:.2f}", f"{now_ms:.2f}", f"{then_ms / now_ms:.2f}"])
    print_table(["case (fwd+bwd, float32)", "threads", "then ms", "now ms", "speed-up"], rows)


def main() -> None:
    # a worker reads the counts the driver checked with plain int: the --baseline worker
    # runs an older checkout, which may lack the distconv.number_text that at_least imports
    count = int if "--worker" in sys.argv else at_least(1, int)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=count, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=count, default=15)
    ap.add_argument(
        "--baseline",
        dest="then",
        metavar="CHECKOUT",
        help="a checkout whose ConvOperator layer to time against this one",
    )
    # its name before the benchmarks agreed on one: the history's commands still run; out of
    # --help, which names each flag once
    ap.add_argument("--then", dest="then", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=count, default=3, help="alternated rounds for --baseline")
    ap.add_argument("--worker", choices=["distconv", "torch", "layer"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.threads[0], args.repeat)
        return
    print(f"# {blas_kernels()}")
    if args.then:
        against_then(args.then, args.threads, args.repeat, args.rounds)
        return
    have_torch = torch_or_say("no torch columns")
    rows = []
    for t in args.threads:
        extra = ["--repeat", str(args.repeat)]
        # both sides run in this one process: the same glibc settings for both, as --baseline
        ours = run_worker(__file__, "distconv", t, extra, env_extra=KEEP_MEMORY_ENV)
        ref = run_worker(__file__, "torch", t, extra) if have_torch else {}
        for name, r in ours.items():
            torch_ms = ref.get(name, {}).get("torch")
            rows.append(
                [
                    name,
                    t,
                    f"{r['baseline']:.2f}",
                    f"{r['operator']:.2f}",
                    f"{r['baseline'] / r['operator']:.2f}",
                    f"{torch_ms:.2f}" if torch_ms else "-",
                    f"{r['operator'] / torch_ms:.2f}" if torch_ms else "-",
                ]
            )
    header = ["case (fwd+bwd, float32)", "threads", "baseline ms", "operator ms", "speed-up"]
    print_table(header + ["torch ms", "operator / torch"], rows)


if __name__ == "__main__":
    main()
