"""Parameter-server transport against a raw ZeroMQ DEALER/ROUTER round trip of the same bytes.

Usage: ``python benchmarks/pserver.py [--mb 16] [--params 100] [--repeat 15]
[--modes insecure,curve] [--code DIR] [--push-bytes N] [--keep-freed-buffers] [--json]
[--finite]``

One worker pushes ``--mb`` MB of float32 gradients as ``--params`` parameters through 2 real
shards (``distconv pserver`` subprocesses on 127.0.0.1, sync mode, SGD) and waits for the new
values: one push + pull per step. The parameter server coalesces a shard's gradients into a
few messages (``push_bytes``, 1 MiB by default: about 16 per step for 16 MB, the shards taking
turns), each carrying its gradients as one frame and answered with its blocks' new values in
one frame (protocol 4: the worker's gradients live in one buffer per shard, a dense parameter
adopts its slice of the reply as its value, the shard copies its reply straight from its store
into ZeroMQ's message), whereas the raw
baseline, measured in the same run, sends the same bytes as one message per gradient (100,
split over 2 raw ROUTER echo processes as the blocks are over the shards) and waits for the
echoes. A second raw baseline, ``raw grouped``, sends the gradients grouped as the worker's
queue would group them with a free link (each shard's queued gradients go once they reach
``push_bytes``, the rest at the end), so the ratios against both show what the grouping
itself buys. A free link is what it models: at ``--push-bytes 0`` that is one message per
gradient, the raw baseline's own (its two ratios then agree). The worker's own grouping, which
``messages`` counts, follows when each push has left: gradients queued while one is on its way
go together, and what is still queued at the end of the step is cut into messages of the
default ``push_bytes`` (1 MiB, as 0 asks for no message per gradient there), which neither
baseline sends. The shards' optimizer time (from their stats) is reported apart and subtracted,
so the ratio compares transports. Each is measured with CURVE off and on. ``messages`` is the
parameter server's push messages per step (the raw baselines' are printed beside).

The machine is shared and noisy: raw and parameter-server steps alternate, one of each per
round, and the medians (and the bests) of ``--repeat`` rounds are reported. ``--code DIR``
measures the ``distconv`` of another checkout (say, an older commit) with this same method, so
two versions compare as ratios, each against the raw round trip of its own run.

Prints milliseconds and the ratios (target: transport <= 1.25x raw, CURVE off). ``--finite``
measures instead the worker's check that every value a reply brings is finite: whole steps
with it against steps without it (the check a no-op), alternating in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import zmq

#: the transports measured: CURVE off and on
MODES = ("insecure", "curve")
#: the checkout this file belongs to, whose code reads the command line
THIS_CHECKOUT = Path(__file__).resolve().parents[1]


def parse_args() -> argparse.Namespace:
    """The command line, read and checked with this checkout's code, before ``--code DIR``'s
    goes first on ``sys.path``: the flags' types (``harness.at_least``) import
    ``distconv.number_text``, which older checkouts lack (``--code`` of one crashed on an
    ImportError before measuring anything). ``modes`` comes back as a list."""
    sys.path.insert(0, str(THIS_CHECKOUT))
    from harness import at_least, refuse_empty_gradients  # beside this file

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=at_least(0, strict=True), default=16.0)
    parser.add_argument("--params", type=at_least(1, int), default=100)
    parser.add_argument("--repeat", type=at_least(1, int), default=15, help="rounds (%(default)s)")
    parser.add_argument(
        "--modes",
        default="insecure,curve",
        help=f"comma-separated, of {' and '.join(MODES)} (%(default)s)",
    )
    parser.add_argument("--code", help="measure the distconv of this checkout instead")
    parser.add_argument(
        "--push-bytes",
        type=at_least(0, int),
        help="the worker's push_bytes (its default if not given; 0 sends each gradient as soon "
        "as the link is free)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument(
        "--finite",
        action="store_true",
        help="measure the worker's check that replies' values are finite: steps with it "
        "against steps without it, alternating, in the same run",
    )
    parser.add_argument(
        "--keep-freed-buffers",
        action="store_true",
        help="apply the shards' allocator setting to this process too (the worker side of "
        "both the raw and the parameter-server round trips)",
    )
    parser.add_argument("--echo", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--keys", help=argparse.SUPPRESS)
    args = parser.parse_args()
    refuse_empty_gradients(parser, args.mb, args.params, "--params")
    # now, not when the echo of a mistyped mode fails after the first mode's whole run
    modes = [mode.strip() for mode in args.modes.split(",")]
    if not set(modes) <= set(MODES) or len(set(modes)) < len(modes):
        parser.error(
            f"--modes {args.modes!r}: name {' and/or '.join(MODES)}, each at most once, "
            "comma-separated"
        )
    args.modes = modes
    # an empty one too (an unset variable): it measured the working directory's
    if args.code is not None and not (Path(args.code) / "distconv" / "__init__.py").is_file():
        parser.error(f"--code {args.code!r}: no distconv package there (distconv/__init__.py)")
    return args


def measured_checkout(code: str | None) -> Path:
    """The checkout whose distconv is measured, first on ``sys.path`` for the imports below:
    ``--code DIR``, else this one. The modules parse_args imported from this checkout are
    dropped, so none of them mixes into the measured one."""
    if code is None:
        return THIS_CHECKOUT
    for name in [m for m in sys.modules if m == "distconv" or m.startswith("distconv.")]:
        del sys.modules[name]
    sys.path.insert(0, str(Path(code).resolve()))
    return Path(code).resolve()


ARGS = parse_args()
REPO = measured_checkout(ARGS.code)

from harness import killed_with_this_process  # noqa: E402  (beside this file)

from distconv.optim import create_optimizer  # noqa: E402
from distconv.parameter import Parameter  # noqa: E402
from distconv.sync.ps import keys as keyfiles  # noqa: E402
from distconv.sync.ps.client import PServerSync  # noqa: E402

HERE = str(Path(__file__).resolve())
ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}

try:  # the setting every training process and shard applies
    from distconv.allocator import keep_freed_memory as keep_freed_buffers
except ImportError:  # an older checkout measured with --code
    try:
        from distconv.sync.ps.server import keep_freed_buffers
    except ImportError:

        def keep_freed_buffers() -> bool:
            return False


#: the start of the temporary folder's name that holds a run's CURVE keys
KEYS_PREFIX = "pserver-benchmark-keys-"
#: how often an echo looks whether its driver is still there (seconds)
PARENT_POLL_S = 0.5


def exit_with_parent() -> None:
    """End this process once the one that started it has gone (a SIGKILLed driver runs no
    cleanup): an echo serves forever otherwise, adopted by init. A thread that looks twice a
    second, not a poll between messages, which would add to the baseline it measures."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(0)  # the main thread is blocked in recv: nothing else to wait for

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def echo_server(keys: str | None) -> None:
    """A raw ROUTER that sends every message straight back (the baseline's far end), with
    the allocator setting the shards use, so both far ends treat buffers alike; it ends with
    its driver."""
    exit_with_parent()
    keep_freed_buffers()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    if keys:
        public, secret, workers = keyfiles.server_keys(keys)
        keyfiles.start_authenticator(ctx, set(workers))
        keyfiles.curve_server(sock, public, secret)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    print(f"echo listening on 127.0.0.1:{port}", flush=True)
    while True:
        sock.send_multipart(sock.recv_multipart(copy=False), copy=False)


def start(cmd: list[str], procs: list[subprocess.Popen]) -> str:
    """Start ``cmd`` (a shard or an echo); the ``host:port`` its first line of output names.

    Its stderr goes to a file, not a pipe nobody reads (a long run's logs would fill it): a
    process that ends before naming its address is reported with its status and that file's
    tail, instead of an IndexError on an empty line.
    """
    errors = tempfile.TemporaryFile(mode="w+")
    # run in the measured checkout: ``python -m`` puts the working directory first on the path;
    # killed as the driver ends, even SIGKILLed (run_mode's finally stops it otherwise)
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=errors,
        text=True,
        env=ENV,
        cwd=REPO,
        preexec_fn=killed_with_this_process(),
    )
    procs.append(proc)
    words = proc.stdout.readline().split()
    if not words:
        status = proc.wait(timeout=30)  # its output ended: it is ending
        errors.seek(0)
        raise SystemExit(
            f"{' '.join(cmd)} (in {REPO}) exited with status {status} before saying where it "
            f"listens; its stderr ends:\n{errors.read()[-2000:]}"
        )
    return words[-1]


class RawRoundTrip:
    """The baseline: every gradient (a header-sized frame + one raw frame) to its echo and
    back, the messages split over the echoes as the blocks are over the shards; with
    ``group_bytes``, each echo's gradients grouped into messages of at least that many bytes
    (the last one of each echo: what is left), in the order they come."""

    def __init__(
        self,
        endpoints: list[str],
        grads: list[np.ndarray],
        keys: str | None,
        group_bytes: int | None = None,
    ) -> None:
        self.ctx = zmq.Context()
        self.socks = []
        for e in endpoints:
            s = self.ctx.socket(zmq.DEALER)
            if keys:
                keyfiles.curve_client(s, keyfiles.worker_keys(keys, 0))
            s.connect(f"tcp://{e}")
            self.socks.append(s)
        self.plan = _plan(len(self.socks), grads, group_bytes)
        self.header = b"\x80" * 64  # a header-sized frame, as the parameter server sends one

    def step(self) -> tuple[float, float]:
        """Seconds of one round trip of every gradient, and this process's CPU seconds in it."""
        t, c = time.perf_counter(), time.process_time()
        for s, arrays in self.plan:
            self.socks[s].send_multipart([self.header, *arrays], copy=False)
        for s, _ in self.plan:
            self.socks[s].recv_multipart(copy=False)
        return time.perf_counter() - t, time.process_time() - c

    def close(self) -> None:
        for s in self.socks:
            s.close(0)
        self.ctx.term()


def _plan(
    echoes: int, grads: list[np.ndarray], group_bytes: int | None
) -> list[tuple[int, list[np.ndarray]]]:
    """The raw messages of one step, in sending order: ``(echo, arrays)``; gradient i goes to
    echo ``i % echoes``, alone or queued until its echo's queue holds ``group_bytes``."""
    if group_bytes is None:
        return [(i % echoes, [g]) for i, g in enumerate(grads)]
    plan: list[tuple[int, list[np.ndarray]]] = []
    queued: list[list[np.ndarray]] = [[] for _ in range(echoes)]
    for i, g in enumerate(grads):
        queue = queued[i % echoes]
        queue.append(g)
        if sum(a.nbytes for a in queue) >= group_bytes:
            plan.append((i % echoes, queue[:]))
            queue.clear()
    return plan + [(s, q) for s, q in enumerate(queued) if q]


class PServerStep:
    """One worker's push + pull of every parameter through the shards (sync mode, SGD)."""

    def __init__(
        self,
        endpoints: list[str],
        grads: list[np.ndarray],
        keys: str | None,
        push_bytes: int | None = None,
    ) -> None:
        self.params = [Parameter(f"p{i}", np.zeros_like(g)) for i, g in enumerate(grads)]
        self.grads = grads
        security = {"keys_dir": keys} if keys else {"insecure": True}
        if push_bytes is not None:  # an older checkout measured with --code may lack it
            security["push_bytes"] = push_bytes
        self.sync = PServerSync(
            create_optimizer("sgd", lr=1e-3),
            rank=0,
            world_size=1,
            pservers=endpoints,
            timeout=60,
            **security,
        )
        self.sync.setup(self.params)

    def step(self) -> tuple[float, float, float, float]:
        """Seconds of one step; the shards' optimizer seconds in it: the slower shard's (they
        update in parallel) and the sum; this process's CPU seconds in it."""
        for p, g in zip(self.params, self.grads):
            p.grad[...] = g
        before = [s["update_seconds"] for s in self.sync.shard_stats()]
        t, c = time.perf_counter(), time.process_time()
        self.sync.start_step(1)
        for p in self.params:  # in the order backward would fire them
            self.sync.on_gradient(p)
        self.sync.finish_step()
        elapsed, cpu = time.perf_counter() - t, time.process_time() - c
        after = [s["update_seconds"] for s in self.sync.shard_stats()]
        optim = [a - b for a, b in zip(after, before)]
        return elapsed, max(optim), sum(optim), cpu

    def close(self) -> None:
        self.sync.close()


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds the processes ``pids`` have used so far (Linux ``/proc``; 0 elsewhere)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def measure(
    raw: RawRoundTrip,
    grouped: RawRoundTrip,
    ps: PServerStep,
    repeat: int,
    echo_pids: list[int],
    shard_pids: list[int],
) -> dict[str, float]:
    """Alternate raw and parameter-server steps, ``repeat`` rounds after 2 of warm-up.

    Milliseconds: medians and bests of the raw step, the median of the grouped raw step, the
    whole step, the optimizer in it, and the transport (whole minus optimizer); and the CPU
    milliseconds per step of all processes (this one in the step, the servers' over the
    round), which a busy machine disturbs less than the wall clock (the parameter server's
    without the shards' optimizer time).
    """
    rows, cpu = [], np.zeros(2)
    for k in range(repeat + 2):
        e0 = cpu_seconds(echo_pids)
        r, r_cpu = raw.step()
        e1, s0 = cpu_seconds(echo_pids), cpu_seconds(shard_pids)
        total, optim, optim_sum, ps_cpu = ps.step()
        s1 = cpu_seconds(shard_pids)
        g, _ = grouped.step()
        if k >= 2:
            rows.append((r, total, optim, total - optim, g))
            cpu += (r_cpu + e1 - e0, ps_cpu + s1 - s0 - optim_sum)
    a = np.array(rows) * 1e3
    med, best = np.median(a, axis=0), a.min(axis=0)
    return {
        "raw": med[0],
        "total": med[1],
        "optim": med[2],
        "transport": med[3],
        "raw_grouped": med[4],
        "raw_best": best[0],
        "transport_best": best[3],
        "raw_cpu": cpu[0] / repeat * 1e3,
        "transport_cpu": cpu[1] / repeat * 1e3,
    }


def measure_finite(ps: PServerStep, repeat: int) -> dict[str, float]:
    """Steps with the worker's check that every value a shard sends is finite, and without it
    (the unchecked path: the check a no-op), alternating, ``repeat`` rounds after 2 of
    warm-up: the medians of their wall and worker CPU milliseconds, and the ratios (checked
    over unchecked) of the medians and of the bests."""
    checked, unchecked = ps.sync._check_finite, lambda runs: None
    rows = []
    for k in range(repeat + 2):
        row = []
        for check in (checked, unchecked):
            ps.sync._check_finite = check
            elapsed, _, _, cpu = ps.step()
            row += [elapsed, cpu]
        if k >= 2:
            rows.append(row)
    ps.sync._check_finite = checked
    a = np.array(rows) * 1e3
    med, best = np.median(a, axis=0), a.min(axis=0)
    return {"checked": med[0], "unchecked": med[2], "checked_cpu": med[1],
            "unchecked_cpu": med[3], "ratio": med[0] / med[2], "best_ratio": best[0] / best[2],
            "cpu_ratio": med[1] / med[3]}  # fmt: skip


def shard_command(i: int, flags: list[str]) -> list[str]:
    return [sys.executable, "-m", "distconv", "pserver", "--bind", "127.0.0.1:0",
            "--shard", str(i), "--num-shards", "2", "--workers", "1", *flags]  # fmt: skip


def run_mode(
    mode: str,
    keys: str,
    grads: list[np.ndarray],
    repeat: int,
    push_bytes: int | None = None,
    finite: bool = False,
) -> dict[str, float]:
    """Start 2 echoes and 2 shards for ``mode`` (insecure or curve), measure, stop them; with
    ``finite``, the cost of the worker's finite check on the replies instead."""
    procs: list[subprocess.Popen] = []
    flags = ["--insecure"] if mode == "insecure" else ["--keys", keys]
    k = keys if mode == "curve" else None
    try:
        echo = [start([sys.executable, HERE, "--echo", mode, "--keys", keys], procs)]
        echo.append(start([sys.executable, HERE, "--echo", mode, "--keys", keys], procs))
        shards = [start(shard_command(i, flags), procs) for i in range(2)]
        ps = PServerStep(shards, grads, k, push_bytes)
        group = getattr(ps.sync, "push_bytes", None)  # an older checkout may not coalesce
        raw, grouped = RawRoundTrip(echo, grads, k), RawRoundTrip(echo, grads, k, group)
        pids = [p.pid for p in procs]
        try:
            if finite:
                return measure_finite(ps, repeat)
            result = measure(raw, grouped, ps, repeat, pids[:2], pids[2:])
            messages = getattr(ps.sync, "push_messages", None)  # a total over every step
            return {
                **result,
                "shard_bytes": ps.sync.layout.shard_bytes(),
                "messages": None if messages is None else messages / (repeat + 2),
                "raw_messages": len(raw.plan),
                "raw_grouped_messages": len(grouped.plan),
            }
        finally:
            raw.close()
            grouped.close()
            ps.close()
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main() -> None:
    args = ARGS
    if args.echo:
        echo_server(args.keys if args.echo == "curve" else None)
        return

    from harness import blas_kernels, exit_on_sigterm  # beside this file

    exit_on_sigterm()  # a SIGTERM stops the echoes and shards (run_mode's finally) too

    # the shards' finite check is BLAS's
    blas = blas_kernels()  # the shards and echoes inherit this environment, and its kernels
    if not args.json:
        print(f"# {blas}", flush=True)
    if args.keep_freed_buffers:
        keep_freed_buffers()
    n = int(args.mb * 2**20 / 4 / args.params)
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(n).astype(np.float32) for _ in range(args.params)]
    total_mb = sum(g.nbytes for g in grads) / 2**20
    # named, as a SIGKILLed driver leaves it behind (its children end with it)
    with tempfile.TemporaryDirectory(prefix=KEYS_PREFIX) as tmp:
        keys = str(Path(tmp) / "keys")
        keyfiles.make_keys(keys, workers=1)
        results = {
            m: run_mode(m, keys, grads, args.repeat, args.push_bytes, args.finite)
            for m in args.modes
        }
    if args.json:
        print(
            json.dumps(
                {
                    "code": str(REPO),
                    "keep_freed_buffers": args.keep_freed_buffers,
                    "blas": blas,
                    **results,
                }
            )
        )
        return
    if args.finite:
        for mode, r in results.items():
            print(
                f"{mode}: {total_mb:.1f} MB a step, medians of {args.repeat}: finite check "
                f"{r['checked']:.2f} ms, unchecked {r['unchecked']:.2f} ms: {r['ratio']:.3f}x "
                f"(bests {r['best_ratio']:.3f}x); worker CPU {r['checked_cpu']:.2f} ms against "
                f"{r['unchecked_cpu']:.2f} ms: {r['cpu_ratio']:.3f}x"
            )
        return
    some = next(iter(results.values()))
    print(
        f"{total_mb:.1f} MB of float32 gradients as {args.params} parameters, 2 shards "
        f"(bytes per shard {some['shard_bytes']}), medians of {args.repeat} alternating rounds"
    )
    print(
        f"messages per step: ps {some['messages'] or float('nan'):.1f}, raw "
        f"{some['raw_messages']}, raw grouped {some['raw_grouped_messages']}"
    )
    print(
        f"{'':10} {'raw ms':>8} {'grouped':>8} {'ps ms':>8} {'optim ms':>9} {'transport':>10} "
        f"{'ratio':>6} {'/grouped':>8}"
    )
    for mode, r in results.items():
        print(
            f"{mode:10} {r['raw']:8.2f} {r['raw_grouped']:8.2f} {r['total']:8.2f} "
            f"{r['optim']:9.2f} {r['transport']:10.2f} {r['transport'] / r['raw']:6.2f}x "
            f"{r['transport'] / r['raw_grouped']:7.2f}x   "
            f"(bests: {r['transport_best'] / r['raw_best']:.2f}x; CPU ms {r['raw_cpu']:.1f} raw, "
            f"{r['transport_cpu']:.1f} ps: {r['transport_cpu'] / r['raw_cpu']:.2f}x)"
        )
    if {"insecure", "curve"} <= set(results):
        off, on = results["insecure"], results["curve"]
        print(
            f"CURVE costs {on['transport'] / off['transport']:.2f}x the transport time "
            f"(raw ZeroMQ: {on['raw'] / off['raw']:.2f}x)"
        )


if __name__ == "__main__":
    main()
