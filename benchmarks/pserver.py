"""Parameter-server transport against a raw ZeroMQ DEALER/ROUTER round trip of the same bytes.

Usage: ``python benchmarks/pserver.py [--mb 16] [--params 100] [--repeat 15]``

One worker pushes ``--mb`` MB of float32 gradients as ``--params`` parameters through 2 real
shards (``distconv pserver`` subprocesses on 127.0.0.1, sync mode, SGD) and waits for the new
values: one push + pull per step. The baseline, measured in the same run, sends the same
messages (same sizes, same split over 2 processes) to 2 raw ROUTER echo processes and waits for
the echoes. The shards' optimizer time (from their stats) is reported apart and subtracted, so
the ratio compares transports. Each is measured with CURVE off and on.

Prints best-of-N milliseconds and the ratios (target: transport <= 1.25x raw, CURVE off).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zmq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from distconv.optim import create_optimizer  # noqa: E402
from distconv.parameter import Parameter  # noqa: E402
from distconv.sync.ps import keys as keyfiles  # noqa: E402
from distconv.sync.ps.client import PServerSync  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}


def echo_server(keys: str | None) -> None:
    """A raw ROUTER that sends every message straight back (the baseline's far end)."""
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
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV
    )
    procs.append(proc)
    return proc.stdout.readline().split()[-1]


def raw_round_trip(endpoints: list[str], grads: list[np.ndarray], keys: str | None, repeat: int):
    """Best ms of sending every gradient (a header + one raw frame) to its echo and back."""
    ctx = zmq.Context()
    socks = []
    for e in endpoints:
        s = ctx.socket(zmq.DEALER)
        if keys:
            keyfiles.curve_client(s, keyfiles.worker_keys(keys, 0))
        s.connect(f"tcp://{e}")
        socks.append(s)
    header = b"\x80" * 64  # a header-sized frame, as the parameter server sends one

    def once() -> None:
        for i, g in enumerate(grads):
            socks[i % len(socks)].send_multipart([header, g], copy=False)
        for i in range(len(grads)):
            socks[i % len(socks)].recv_multipart(copy=False)

    best = _best(once, repeat)
    for s in socks:
        s.close(0)
    ctx.term()
    return best


def pserver_step(endpoints: list[str], grads: list[np.ndarray], keys: str | None, repeat: int):
    """Best ms of one push + pull of every parameter, and the shards' optimizer ms in it."""
    params = [Parameter(f"p{i}", np.zeros_like(g)) for i, g in enumerate(grads)]
    security = {"keys_dir": keys} if keys else {"insecure": True}
    sync = PServerSync(
        create_optimizer("sgd", lr=1e-3),
        rank=0,
        world_size=1,
        pservers=endpoints,
        timeout=60,
        **security,
    )
    sync.setup(params)
    totals, optimizer = [], []
    try:
        for k in range(repeat + 2):
            for p, g in zip(params, grads):
                p.grad[...] = g
            before = [s["update_seconds"] for s in sync.shard_stats()]
            t = time.perf_counter()
            sync.start_step(1)
            for p in params:  # in the order backward would fire them
                sync.on_gradient(p)
            sync.finish_step()
            elapsed = time.perf_counter() - t
            after = [s["update_seconds"] for s in sync.shard_stats()]
            if k >= 2:  # warm-up
                totals.append(elapsed)
                # the shards update in parallel: the slower one's optimizer time is on the path
                optimizer.append(max(a - b for a, b in zip(after, before)))
        shard_bytes = sync.layout.shard_bytes()
    finally:
        sync.close()
    best = int(np.argmin(np.array(totals) - np.array(optimizer)))
    return totals[best] * 1e3, optimizer[best] * 1e3, shard_bytes


def _best(fn, repeat: int) -> float:
    fn()
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=16.0)
    parser.add_argument("--params", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--echo", choices=("insecure", "curve"), help=argparse.SUPPRESS)
    parser.add_argument("--keys", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo:
        echo_server(args.keys if args.echo == "curve" else None)
        return

    n = int(args.mb * 2**20 / 4 / args.params)
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(n).astype(np.float32) for _ in range(args.params)]
    total_mb = sum(g.nbytes for g in grads) / 2**20
    import tempfile

    procs: list[subprocess.Popen] = []
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        keys = str(Path(tmp) / "keys")
        keyfiles.make_keys(keys, workers=1)
        try:
            for mode in ("insecure", "curve"):
                flags = ["--insecure"] if mode == "insecure" else ["--keys", keys]
                echo = [
                    start([sys.executable, __file__, "--echo", mode, "--keys", keys], procs)
                    for _ in range(2)
                ]
                shard = [
                    start(
                        [
                            sys.executable,
                            "-m",
                            "distconv",
                            "pserver",
                            "--bind",
                            "127.0.0.1:0",
                            "--shard",
                            str(i),
                            "--num-shards",
                            "2",
                            "--workers",
                            "1",
                            *flags,
                        ],
                        procs,
                    )
                    for i in range(2)
                ]
                k = keys if mode == "curve" else None
                raw = raw_round_trip(echo, grads, k, args.repeat)
                total, opt, loads = pserver_step(shard, grads, k, args.repeat)
                results[mode] = (raw, total, opt, loads)
        finally:
            for p in procs:
                p.kill()
                p.wait()
    print(
        f"{total_mb:.1f} MB of float32 gradients as {args.params} parameters, 2 shards "
        f"(bytes per shard {results['insecure'][3]}), best of {args.repeat}"
    )
    print(f"{'':10} {'raw ms':>8} {'ps ms':>8} {'optim ms':>9} {'transport':>10} {'ratio':>6}")
    for mode, (raw, total, opt, _) in results.items():
        print(
            f"{mode:10} {raw:8.2f} {total:8.2f} {opt:9.2f} {total - opt:10.2f} "
            f"{(total - opt) / raw:6.2f}x"
        )
    off, on = results["insecure"], results["curve"]
    print(
        f"CURVE costs {(on[1] - on[2]) / (off[1] - off[2]):.2f}x the transport time "
        f"(raw ZeroMQ: {on[0] / off[0]:.2f}x)"
    )


if __name__ == "__main__":
    main()
