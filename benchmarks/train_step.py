"""A whole LeNet training step, distconv against PyTorch on the CPU, plus a per-layer breakdown.

Usage: ``python benchmarks/train_step.py [--threads 2] [--rounds 5] [--repeat 30]
[--cases NAME ...] [--clock wall|cpu] [--keep-memory distconv|both|neither]``

The model is the same in both libraries: conv 32 3x3 pad 1 + relu, max-pool 2, conv 64 3x3
pad 1 + relu, max-pool 2, fc 128 + relu, fc 10, softmax cross-entropy, Adam (ours is
:func:`distconv.models.lenet`). Inputs are seeded random images of the digits' 8x8 and MNIST's
28x28 size (the speed does not depend on the pixel values).

Every measurement runs in its own process with its thread count fixed before import; the two
libraries alternate, ``--rounds`` times, and each figure is the median over the rounds of a
process's median step time. The table reports samples/s, distconv over PyTorch (higher is
better). The breakdown times each layer alone on the inputs of a real step (forward, then
backward from a ones gradient, each backward after an untimed forward as in a step; PyTorch's
backward is its forward+backward minus its forward; ``n/a (noise)``, and no ratio, where that
comes out negative).
``step overhead`` is measured inside real steps: the step's time outside every layer's
forward/backward and the optimizer, i.e. the Python around the layers (network loop, Args,
dicts, the sync's callbacks). The step is the sync contract's own (start_step, forward,
backward, finish_step), without the Trainer's data feeding, metrics and checkpoint checks.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import (  # noqa: E402
    CLOCKS,
    at_least,
    blas_kernels,
    print_table,
    run_worker,
    torch_or_say,
)

# name: (image side, batch)
CASES = {
    "digits 8x8 b16": (8, 16),
    "digits 8x8 b64": (8, 64),
    "MNIST-size 28x28 b64": (28, 64),
}
LAYERS = ("conv1", "pool1", "conv2", "pool2", "fc1", "fc2", "loss")


_clock = time.perf_counter


def median_ms(
    fn: Callable[[], object],
    repeat: int,
    warmup: int = 3,
    before: Callable[[], object] | None = None,
) -> float:
    """Median of ``repeat`` timed calls, in milliseconds, on the chosen clock; ``before``
    (untimed) runs ahead of each call."""
    times = []
    for i in range(warmup + repeat):
        if before is not None:
            before()
        t = _clock()
        fn()
        if i >= warmup:
            times.append(_clock() - t)
    return statistics.median(times) * 1e3


def _data(side: int, batch: int):
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, 1, side, side)).astype(np.float32)
    y = rng.integers(0, 10, batch)
    return x, y


# -- distconv -----------------------------------------------------------------------------------
def _distconv_step(net, sync, x, y) -> None:
    """One training step as the trainer runs it, through the sync contract alone."""
    from distconv.arg import Arg

    sync.start_step(len(y))
    net.forward({"image": Arg(x, needs_grad=False), "label": Arg(ids=y, needs_grad=False)})
    net.backward(sync, loss="loss", loss_scale=len(y))
    sync.finish_step()


def _distconv_worker(side: int, batch: int, repeat: int) -> dict:
    import numpy as np

    from distconv.models import lenet
    from distconv.optim import Adam
    from distconv.sync.local import LocalSync

    x, y = _data(side, batch)
    net = lenet((1, side, side))
    net.check_finite = False  # as the trainer: data sets are checked once, not per step
    sync = LocalSync(Adam(1e-3))
    net.zero_grad()
    sync.setup([p for p in net.parameters() if not p.static], {})

    def step() -> None:
        _distconv_step(net, sync, x, y)

    result = {"step": median_ms(step, repeat)}
    result["overhead"] = _step_overhead(net, sync, step, repeat)

    # every layer alone, on the Args of a real step
    step()
    noop = lambda p: None  # noqa: E731
    for name in LAYERS:
        layer = net.layers[name]
        args = [net.outputs[i] for i in net.wiring[name]]

        def fwd(layer=layer, args=args):
            layer.forward(*args)

        def bwd(layer=layer, args=args):
            for a in args:
                a.grad = None
            layer.output.grad = np.ones_like(layer.output.value)
            layer.backward(noop)

        result[f"{name} fwd"] = median_ms(fwd, repeat)
        # each backward after its own forward, as in a step: a convolution's backward uses
        # the columns its forward kept (and drops them), which a second backward would rebuild
        result[f"{name} bwd"] = median_ms(bwd, repeat, before=fwd)

    params = [p for p in net.parameters() if not p.static]

    def optimizer():
        for p in params:
            sync.on_gradient(p)

    # each call a step of its own: LocalSync refuses a parameter that fires twice in one, and
    # a step begun inside another (abandon_step ends the last untimed; finish_step has nothing
    # left to do that the optimizer's time should count)
    def new_step() -> None:
        sync.abandon_step()
        sync.start_step(batch)

    result["optimizer"] = median_ms(optimizer, repeat, before=new_step)
    return result


def _step_overhead(net, sync, step: Callable[[], object], repeat: int) -> float:
    """Median over steps of the step's time outside every layer's forward/backward and the
    optimizer: the Python around the layers (network loop, Args, dicts, the sync's callbacks;
    the step is driven as `_distconv_step` drives it, not through the Trainer).

    The layers and the optimizer are timed inside real steps by wrapping their methods.
    """
    inside = [0.0]

    def timed(fn: Callable) -> Callable:
        def call(*args):
            t = _clock()
            before = inside[0]
            out = fn(*args)
            # a layer's backward runs the optimizer through its callback: count that once
            inside[0] = before + (_clock() - t)
            return out

        return call

    for layer in net.layers.values():
        layer.forward, layer.backward = timed(layer.forward), timed(layer.backward)
    sync.on_gradient = timed(sync.on_gradient)
    for _ in range(3):
        step()
    outside = []
    for _ in range(repeat):
        inside[0] = 0.0
        t = _clock()
        step()
        outside.append(_clock() - t - inside[0])
    for obj in (*net.layers.values(), sync):
        for attr in ("forward", "backward", "on_gradient"):
            obj.__dict__.pop(attr, None)
    return statistics.median(outside) * 1e3


# -- PyTorch ------------------------------------------------------------------------------------
def _torch_worker(side: int, batch: int, repeat: int) -> dict:
    import torch
    from torch import nn

    torch.manual_seed(0)
    x_np, y_np = _data(side, batch)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    flat = 64 * (side // 4) ** 2
    stages = {
        "conv1": nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU()),
        "pool1": nn.MaxPool2d(2),
        "conv2": nn.Sequential(nn.Conv2d(32, 64, 3, padding=1), nn.ReLU()),
        "pool2": nn.MaxPool2d(2),
        "fc1": nn.Sequential(nn.Flatten(), nn.Linear(flat, 128), nn.ReLU()),
        "fc2": nn.Linear(128, 10),
    }
    model = nn.Sequential(*stages.values())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    result = {"step": median_ms(step, repeat)}

    inp = x
    for name in LAYERS:
        module = stages.get(name)
        inp = inp.detach().requires_grad_(name != "conv1")

        def fwd(module=module, inp=inp):
            # with grad enabled, as in a training step: oneDNN may pick another algorithm under
            # no_grad (conv1 at 28x28 took 11.6 ms there, and its backward came out negative)
            return module(inp) if module is not None else loss_fn(inp, y)

        def bwd_and_fwd(module=module, inp=inp):
            out = module(inp) if module is not None else loss_fn(inp, y)
            out.backward(torch.ones_like(out))

        result[f"{name} fwd"] = median_ms(fwd, repeat)
        # torch's backward needs the graph of a forward with grad enabled: time both, subtract;
        # kept negative where a stall in the forward's median outweighed it (the report says so)
        result[f"{name} bwd"] = median_ms(bwd_and_fwd, repeat) - result[f"{name} fwd"]
        if module is not None:
            with torch.no_grad():
                inp = module(inp)
    result["optimizer"] = median_ms(opt.step, repeat)
    return result


def worker(library: str, case: str, repeat: int, clock: str, keep_memory: str) -> None:
    global _clock
    _clock = CLOCKS[clock]
    side, batch = CASES[case]
    if keep_memory == "both" or (keep_memory == "distconv" and library == "distconv"):
        from distconv.allocator import keep_freed_memory

        keep_freed_memory()  # what `distconv train` does at start-up
    if library == "torch":
        import torch

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        print(json.dumps(_torch_worker(side, batch, repeat)))
    else:
        print(json.dumps(_distconv_worker(side, batch, repeat)))


def _median_of(results: list[dict]) -> dict:
    return {k: statistics.median(r[k] for r in results) for k in results[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=at_least(1, int), default=2)
    ap.add_argument(
        "--rounds", type=at_least(1, int), default=5, help="alternated processes per library"
    )
    ap.add_argument("--repeat", type=at_least(1, int), default=30, help="timed calls per process")
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--clock", choices=list(CLOCKS), default="wall")
    ap.add_argument(
        "--keep-memory",
        choices=["distconv", "both", "neither"],
        default="distconv",
        help="which side keeps freed memory mapped (distconv.allocator): as each library ships "
        "(distconv), or the same allocator setting for both",
    )
    ap.add_argument("--worker", choices=["distconv", "torch"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.cases[0], args.repeat, args.clock, args.keep_memory)
        return
    libs = ["distconv", "torch"] if torch_or_say("printing distconv times only") else ["distconv"]
    measured: dict[str, dict[str, dict]] = {}
    for case in args.cases:
        runs: dict[str, list[dict]] = {lib: [] for lib in libs}
        for r in range(args.rounds):
            for lib in libs if r % 2 == 0 else libs[::-1]:  # neither always goes first
                extra = ["--cases", case, "--repeat", str(args.repeat), "--clock", args.clock]
                extra += ["--keep-memory", args.keep_memory]
                runs[lib].append(run_worker(__file__, lib, args.threads, extra))
        measured[case] = {lib: _median_of(r) for lib, r in runs.items()}
    _report(measured, args)


#: a PyTorch backward time below zero: its forward+backward minus its forward, where a stall in
#: the forward's median outweighed the backward (a loaded machine, a small ``--repeat``)
NOISE = "n/a (noise)"


def _torch_cell(ref: dict, key: str) -> str:
    """PyTorch's time for ``key`` in the per-layer table: ``-`` without PyTorch, :data:`NOISE`
    where the subtraction came out negative, which no backward takes."""
    if not ref:
        return "-"
    return f"{ref[key]:.2f}" if ref[key] >= 0 else NOISE


def _report(measured: dict[str, dict[str, dict]], args: argparse.Namespace) -> None:
    print(
        f"# training step, {args.threads} thread(s), {args.clock} clock, median over "
        f"{args.rounds} alternated processes of each process's median of {args.repeat} steps; "
        f"freed memory kept mapped by: {args.keep_memory}"
    )
    print(f"# {blas_kernels()}")
    rows = []
    for case, res in measured.items():
        ours, ref = res["distconv"], res.get("torch")
        batch = CASES[case][1]
        rows.append(
            [
                case,
                f"{ours['step']:.2f}",
                f"{ref['step']:.2f}" if ref else "-",
                f"{batch / ours['step'] * 1e3:.0f}",
                f"{ref['step'] / ours['step']:.2f}" if ref else "-",
            ]
        )
    print_table(["case", "distconv ms", "torch ms", "distconv samples/s", "speed vs torch"], rows)
    for case, res in measured.items():
        print(f"\n# per layer, {case} (ms; ratio = distconv / torch time, lower is better)")
        ours, ref = res["distconv"], res.get("torch", {})
        rows = []
        for name in (*LAYERS, "optimizer"):
            keys = [f"{name} fwd", f"{name} bwd"] if name != "optimizer" else ["optimizer"]
            mine, theirs = sum(ours[k] for k in keys), sum(ref.get(k, 0.0) for k in keys)
            cells = [f"{ours[k]:.2f}" for k in keys] + ["-"] * (2 - len(keys))
            tcells = [_torch_cell(ref, k) for k in keys] + ["-"] * (2 - len(keys))
            noise = any(ref.get(k, 0.0) < 0 for k in keys)  # no ratio to a time we do not have
            ratio = f"{mine / theirs:.2f}" if theirs and not noise else "-"
            rows.append([name, *cells, *tcells, ratio])
        overhead = ours["overhead"]
        rows.append(["step overhead", f"{overhead:.2f}", "-", "-", "-", "-"])
        print_table(["layer", "ours fwd", "ours bwd", "torch fwd", "torch bwd", "ratio"], rows)
        print(
            f"distconv step {ours['step']:.2f} ms; Python outside the layers and the optimizer "
            f"{overhead:.2f} ms = {100 * overhead / ours['step']:.1f} % of it"
        )


if __name__ == "__main__":
    main()
