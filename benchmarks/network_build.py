"""How long building a Network takes, against its number of layers (and another checkout).

Usage: ``python3 benchmarks/network_build.py [--sizes N ...] [--baseline CHECKOUT] [--rounds 1]``

Two shapes of network, each of ``N`` layers (500, 1000, 2000 and 4000 by default): ``chain``,
N one-input FullyConnected layers each reading the last; ``heads``, N/2 FullyConnected layers
reading one input, each under a softmax cross-entropy of its own (the double-softmax check
walks down from losses). Only the ``Network.add`` calls are timed: the layers are built first.
``--baseline DIR`` (``--then``, its old name) times a checkout of other code (``git worktree
add DIR <commit>``) the same way, each side in processes of its own, taking turns, and prints
its time over this checkout's (the columns ``then``): an add whose cost grew with the network
made that ratio grow with N.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import at_least, print_table, run_worker  # noqa: E402

SHAPES = ("chain", "heads")


def _layers(shape: str, n: int) -> list[tuple[str, object, list[str]]]:
    """The ``(name, layer, inputs)`` of each add for a network of ``shape`` and ``n`` layers."""
    from distconv.layers import FullyConnected, SoftmaxCrossEntropy

    if shape == "chain":
        return [
            (f"fc{i}", FullyConnected(4, 4), ["x" if i == 0 else f"fc{i - 1}"]) for i in range(n)
        ]
    adds = []
    for i in range(n // 2):
        adds.append((f"fc{i}", FullyConnected(4, 3), ["x"]))
        adds.append((f"loss{i}", SoftmaxCrossEntropy(), [f"fc{i}", "label"]))
    return adds


def _build_seconds(shape: str, n: int) -> float:
    """Seconds the adds of one network of ``shape`` and ``n`` layers take."""
    from distconv import Network

    adds, net = _layers(shape, n), Network()
    start = time.perf_counter()
    for name, layer, inputs in adds:
        net.add(name, layer, inputs)
    return time.perf_counter() - start


def worker(sizes: list[int]) -> None:
    """Time every shape and size in this process; print them as one JSON line."""
    print(
        json.dumps({shape: {str(n): _build_seconds(shape, n) for n in sizes} for shape in SHAPES})
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=at_least(2, int), nargs="+", default=[500, 1000, 2000, 4000])
    ap.add_argument(
        "--baseline",
        dest="then",
        metavar="CHECKOUT",
        help="a checkout of other code, timed alike",
    )
    # its name before the benchmarks agreed on one: the history's commands still run; out of
    # --help, which names each flag once
    ap.add_argument("--then", dest="then", help=argparse.SUPPRESS)
    ap.add_argument(
        "--rounds", type=at_least(1, int), default=1, help="processes per side; the best counts"
    )
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.sizes)
        return
    if args.then and not os.path.isfile(os.path.join(args.then, "distconv", "__init__.py")):
        # else the worker imported this checkout's distconv (PYTHONPATH): a mistyped path
        # printed "then / this" of about 1.0, as if the two checkouts built alike
        ap.error(f"--baseline {args.then}: no distconv package there (a checkout's root?)")
    sides = {"this": None} | ({"then": os.path.abspath(args.then)} if args.then else {})
    extra = ["--sizes", *map(str, args.sizes)]
    best: dict[str, dict[str, dict[str, float]]] = {}
    for _ in range(args.rounds):
        for side, code in sides.items():  # taking turns: a load that comes and goes hits both
            got = run_worker(__file__, "distconv", 1, extra, **({"code": code} if code else {}))
            for shape, times in got.items():
                for n, s in times.items():
                    kept = best.setdefault(side, {}).setdefault(shape, {})
                    kept[n] = min(s, kept.get(n, s))
    header = ["shape", "layers", "this (s)"] + (["then (s)", "then / this"] if args.then else [])
    rows = []
    for shape in SHAPES:
        for n in map(str, args.sizes):
            row = [shape, n, f"{best['this'][shape][n]:.3f}"]
            if args.then:
                then = best["then"][shape][n]
                row += [f"{then:.3f}", f"{then / best['this'][shape][n]:.1f}"]
            rows.append(row)
    print_table(header, rows)


if __name__ == "__main__":
    main()
