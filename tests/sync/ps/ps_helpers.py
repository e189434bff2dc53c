"""Helpers for the parameter-server tests. Real shards: ``python -m distconv pserver`` subprocesses.

Each shard binds 127.0.0.1 port 0 and prints the port it got; every process started here is
killed in the fixture's teardown. The subprocesses import this checkout's ``distconv``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq

from distconv.arg import Arg
from distconv.equivalence import mismatch, model, weights
from distconv.init import set_seed
from distconv.layers import FullyConnected, Mixed, SoftmaxCrossEntropy, TableProjection
from distconv.network import Network
from distconv.optim import create_optimizer
from distconv.stop_request import StopRequest
from distconv.sync.base import SyncError
from distconv.sync.local import LocalSync
from distconv.sync.peers import PeerFailed
from distconv.sync.ps.blocks import Layout, ParamSpec, rows_view
from distconv.sync.ps.client import PServerSync
from distconv.sync.ps.wire import pack, unpack_arrays, unpack_header
from tests.child_env import child_path

REPO_ROOT = Path(__file__).resolve().parents[3]


class Shards:
    """Starts and stops shard processes; ``endpoints`` lists the running ones' HOST:PORT."""

    #: seconds a shard may take to print its address (a slow import on a busy machine)
    start_seconds = 30.0

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def start(
        self,
        num_shards: int,
        workers: int,
        *,
        keys: str | None = None,
        mode: str = "sync",
        extra: Sequence[str] = (),
        source: Path | None = None,
    ) -> list[str]:
        """Start ``num_shards`` shards of a job of ``workers``; their endpoints. ``source``: a
        copy of distconv's source they run instead of this checkout's (another build)."""
        endpoints = []
        for i in range(num_shards):
            log = self.tmp_path / f"shard{i}-{len(self.procs)}.log"
            cmd = [
                sys.executable,
                "-m",
                "distconv",
                "pserver",
                "--bind",
                "127.0.0.1:0",
                "--shard",
                str(i),
                "--num-shards",
                str(num_shards),
                "--workers",
                str(workers),
                "--mode",
                mode,
                *(["--keys", keys] if keys else ["--insecure"]),
                # stop at stop(), as most tests' workers never say bye; `extra` may override
                *("--drain-seconds", "0"),
                *extra,
            ]
            endpoints.append(self.launch(cmd, log, source))
        return endpoints

    def launch(self, cmd: Sequence[str], log: Path, source: Path | None = None) -> str:
        """Start the shard ``cmd`` (its stderr to ``log``), stopped with the others at the
        end; its endpoint, once it says it listens. ``source``: run from there, first on its
        path (``-m`` puts the working directory before ``PYTHONPATH``)."""
        path = child_path(source) if source else child_path()
        with open(log, "w") as err:
            proc = subprocess.Popen(
                list(cmd),
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env={**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"},
                cwd=source,
            )
        self.procs.append(proc)
        self.logs.append(log)
        line = first_line(proc, self.start_seconds)
        if line is None or "listening on" not in line:
            proc.kill()  # not left behind, nor waited for until pytest-timeout
            status = proc.wait()
            said = (
                f"did not say it listens within {self.start_seconds} s"
                if line is None
                else f"exited with status {status}, having said {line!r}"
            )
            pytest.fail(f"shard {log.stem} {said}: {log.read_text()}", pytrace=False)
        return line.split()[-1]

    def tampered(self, code: str, *args: str, mode: str = "sync") -> str:
        """Start one shard of one worker whose Python is ``code`` (a real shard patched by a
        test, reading ``args``); its endpoint."""
        log = self.tmp_path / f"tampered{len(self.procs)}.log"
        return self.launch(shard_argv(["-c", code, *args], mode=mode), log)

    def log_text(self) -> str:
        return "\n".join(p.read_text() for p in self.logs)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()


def exits_within(proc: subprocess.Popen, seconds: float) -> int | None:
    """``proc``'s exit status once it exits within ``seconds``; None where it runs on."""
    try:
        return proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return None


def first_line(proc: subprocess.Popen, seconds: float) -> str | None:
    """The first line ``proc`` writes to its stdout pipe (what it has written, where it
    exits before a newline), or None if it writes no line within ``seconds``. Read from the
    pipe itself, so that a line half written never blocks (``readline`` would)."""
    fd, data, end = proc.stdout.fileno(), b"", time.monotonic() + seconds
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while b"\n" not in data:
            left = end - time.monotonic()
            if left <= 0 or not selector.select(left):
                return None
            chunk = os.read(fd, 4096)
            if not chunk:  # it exited, or closed its stdout
                break
            data += chunk
    return data.decode(errors="replace").split("\n", 1)[0]


def shard_argv(
    start: Sequence[str],
    *,
    shard: int = 0,
    shards: int = 1,
    workers: int = 1,
    mode: str = "sync",
    timeout: float | None = None,
) -> list[str]:
    """One shard's command line, insecure on 127.0.0.1 (port 0), with nothing drained at its
    end: ``python START pserver ...``, START saying what Python runs (``["-m", "distconv"]``,
    or ``["-c", CODE, *ARGS]`` for a shard patched by a test)."""
    argv = [sys.executable, *start, "pserver", "--bind", "127.0.0.1:0", "--shard", str(shard)]
    argv += ["--num-shards", str(shards), "--workers", str(workers), "--mode", mode]
    argv += ["--insecure", "--drain-seconds", "0"]
    return argv + ([] if timeout is None else ["--timeout", str(timeout)])


def parts_job(
    tmp_path: Path,
    train: Sequence[str],
    shard1_wrapper: Sequence[str] = (),
    after_start: Callable[[Path], None] | None = None,
) -> tuple[subprocess.CompletedProcess, str]:
    """``distconv train TRAIN`` against two fresh shards writing their checkpoint parts in
    ``tmp_path/parts/s0`` and ``s1``; shard 1's command after ``shard1_wrapper`` (``unshare
    -rm sh -c ...``: a full disk of its own), and ``after_start(parts)`` once both serve (a file
    put in ``s1``'s place, which the start's check would have refused). Returns the finished
    job and the shards' log."""
    from tests.child_env import child_env
    from tests.processes import run_job

    parts = tmp_path / "parts"
    (parts / "s1").mkdir(parents=True)
    shards = Shards(tmp_path)
    try:
        endpoints = []
        for i in (0, 1):
            argv = shard_argv(["-m", "distconv"], shard=i, shards=2)
            argv += ["--checkpoint-dir", str(parts / f"s{i}")]
            if i == 1:
                argv = [*shard1_wrapper, *argv]
            endpoints.append(shards.launch(argv, tmp_path / f"shard{i}.log"))
        if after_start is not None:
            after_start(parts)
        argv = [sys.executable, "-m", "distconv", "train", *train, "--out", str(tmp_path / "out"),
                "--pservers", ",".join(endpoints), "--insecure"]  # fmt: skip
        done = run_job(argv, child_env(), timeout=120)
    finally:
        shards.stop()
    return done, shards.log_text()


def run_pserver(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``distconv pserver --bind 127.0.0.1:0 --shard 0 --num-shards 1 ARGS`` in a process of
    its own, output captured: for a shard that should refuse to start. A shard that starts
    serves until ``timeout`` (``subprocess.TimeoutExpired``): long, as a loaded CI machine
    takes seconds to import and refuse."""
    return subprocess.run(
        [sys.executable, "-m", "distconv", "pserver", "--bind", "127.0.0.1:0", "--shard", "0",
         "--num-shards", "1", *args],
        capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PYTHONPATH": child_path()},
    )  # fmt: skip


def small_net(seed: int = 0, dtype=np.float64, hidden: int = 8):
    """The small LeNet of the equivalence tests (:func:`distconv.equivalence.model`), every
    parameter cast to ``dtype`` (``hidden`` units in its first fully connected layer)."""
    net = model(seed, hidden=hidden)
    for p in net.parameters():
        p.cast(dtype)
    return net


def regression_net():
    """One fully connected layer (4 inputs, 1 output) under a squared loss: the model of the
    scripts that fit, fail before setup and fit again, fed ``x`` and ``target``."""
    from distconv.layers import FullyConnected, MSELoss
    from distconv.network import Network

    net = Network()
    net.add("out", FullyConnected(4, 1), "x")
    net.add("loss", MSELoss(), ["out", "target"])
    return net


def sparse_table_net(vocab: int, width: int, classes: int, seed: int = 0):
    """A ``sparse=True`` table of ``vocab x width`` (``embed.proj0.weight``) under a classifier,
    in float64: the sparse-row tests' model, fed ``words`` (ids) and ``label``."""
    set_seed(seed)
    net = Network()
    net.add("embed", Mixed([TableProjection(vocab, width, sparse=True)]), inputs="words")
    net.add("logits", FullyConnected(width, classes), inputs="embed")
    net.add("loss", SoftmaxCrossEntropy(), inputs=["logits", "label"])
    for p in net.parameters():
        p.cast(np.float64)
    return net


def batches(steps: int, batch: int, seed: int = 5) -> list[tuple[np.ndarray, np.ndarray]]:
    """``steps`` global batches of random images and labels."""
    rng = np.random.default_rng(seed)
    return [
        (rng.standard_normal((batch, 1, 8, 8)), rng.integers(0, 4, size=batch))
        for _ in range(steps)
    ]


def rank_0_beside(
    endpoint: str, rank_1: list[str], env: dict[str, str]
) -> tuple[BaseException, int, str]:
    """Rank 0 of 2 trains three steps on ``endpoint`` while ``rank_1`` (a command, rank 1's
    process) leaves after one: the error rank 0's training ends on, with rank 1's exit status
    and stderr. A rank 1 that hangs is killed: it never outlives the call."""
    from distconv.sync.base import SyncError

    proc = subprocess.Popen(
        rank_1, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    net, sync = small_net(), insecure_worker([endpoint], 0, 2)
    try:
        sync.setup(net.parameters())
        with pytest.raises(SyncError) as told:
            train_steps(net, sync, batches(3, 8), 0, 2)
    finally:
        sync.close()
        try:
            _, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
            proc.wait()
    return told.value, proc.returncode, err


def train_steps(net, sync, data, rank: int = 0, world: int = 1) -> None:
    """Drive ``sync`` at the contract level; rank r takes examples r, r+world, ... of each batch."""
    for x, y in data:
        xs, ys = x[rank::world], y[rank::world]
        sync.start_step(len(ys))
        net.forward({"image": Arg(xs, needs_grad=False), "label": Arg(ids=ys, needs_grad=False)})
        net.backward(sync, loss="loss", loss_scale=len(ys))
        sync.finish_step()


def insecure_worker(
    endpoints: Sequence[str],
    rank: int = 0,
    world: int = 1,
    *,
    optimizer: str = "sgd",
    lr: float = 0.05,
    timeout: float = 20,
    block_bytes: int = 64,
    **settings: Any,
):
    """The tests' usual worker: a ``PServerSync`` on shards started without CURVE (``settings``:
    any other of its arguments, as ``job_id``)."""
    return PServerSync(
        create_optimizer(optimizer, lr=lr),
        rank=rank,
        world_size=world,
        pservers=list(endpoints),
        insecure=True,
        timeout=timeout,
        block_bytes=block_bytes,
        **settings,
    )


def shorter_wait_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warnings that a worker waits less for a shard's reply than its shards wait for every
    worker (not ``--insecure``'s, nor any other)."""
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    return [m for m in said if "for a shard's reply" in m]


def assert_missing_rank_named_unwarned(
    tmp_path: Path, argv: Sequence[str], caplog: pytest.LogCaptureFixture, timeout: float
) -> None:
    """Rank 0 of a two-worker job (``timeout=``) on one real shard started with ``argv``, rank 1
    never started: its setup raises ``PeerFailed`` naming rank 1, not the shard's silence, and
    no warning says the shard outwaits it. The shard is stopped at the end."""
    shards = Shards(tmp_path)
    try:
        endpoint = shards.launch(argv, tmp_path / "shard.log")
        sync = insecure_worker([endpoint], rank=0, world=2, timeout=timeout)
        caplog.set_level(logging.WARNING, "distconv.pserver")
        try:
            missing = r"rank 1 \(which never said hello\) sent nothing for all_equal:"
            with pytest.raises(PeerFailed, match=missing):
                sync.setup(small_net().parameters())
        finally:
            sync.close()
    finally:
        shards.stop()
    assert shorter_wait_warnings(caplog) == [], caplog.text


def pserver_sync(endpoints: Sequence[str], optimizer, rank: int, world_size: int) -> PServerSync:
    """A worker on shards started without CURVE, made in its own process by
    :func:`distconv.equivalence.assert_matches_local` from ``partial(pserver_sync, endpoints)``."""
    return PServerSync(
        optimizer, rank=rank, world_size=world_size, pservers=list(endpoints), insecure=True,
        timeout=30,
    )  # fmt: skip


#: the workers :func:`restarted_pserver_sync` made in this process
_made_here = itertools.count()


def restarted_pserver_sync(
    first: Sequence[str], then: Sequence[str], optimizer, rank: int, world_size: int
) -> PServerSync:
    """:func:`pserver_sync` on the shards ``first`` for a rank's first worker, and on ``then``
    (shards started afresh, holding nothing of the run) for the worker it resumes with in a
    restarted equivalence check: its optimizer state comes from the chief's checkpoint alone."""
    endpoints = first if next(_made_here) == 0 else then
    return pserver_sync(endpoints, optimizer, rank, world_size)


def worker_process(endpoints, rank, world, steps, tmp_path, timeout=10.0) -> subprocess.Popen:
    """A real worker process (``ps_worker.py``: the small net, SGD, ``block_bytes=64``, batch 8)
    that trains ``steps`` steps and prints ``step N`` after each; stdout and stderr piped."""
    worker = Path(__file__).with_name("ps_worker.py")
    return subprocess.Popen(
        [sys.executable, str(worker), ",".join(endpoints), str(rank), str(world), str(steps),
         "sgd", "-", str(timeout), str(tmp_path / f"worker{rank}.npz")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": child_path(worker.parent), "OMP_NUM_THREADS": "1"},
    )  # fmt: skip


def assert_equals_local_training(net, data, optimizer: str = "sgd", lr: float = 0.05) -> None:
    """``net``'s weights equal :func:`small_net` trained on ``data`` by ``LocalSync`` (1e-10 of
    each parameter's largest value: :func:`distconv.equivalence.mismatch` names the worst)."""
    ref = small_net()
    local = LocalSync(create_optimizer(optimizer, lr=lr))
    local.setup(ref.parameters())
    train_steps(ref, local, data)
    assert (wrong := mismatch(weights(ref), weights(net))) is None, wrong


def run_ranks(fn: Callable[[int], object], world: int, timeout: float = 100) -> list[object]:
    """Run ``fn(rank)`` for every rank in threads; re-raise the first exception."""
    results: list[object] = [None] * world
    errors: list[BaseException | None] = [None] * world

    def body(rank: int) -> None:
        try:
            results[rank] = fn(rank)
        except BaseException as exc:  # reported to the test below
            errors[rank] = exc

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    for exc in errors:
        if exc is not None:
            raise exc
    return results


def train_sparse_ranks(
    endpoints: Sequence[str],
    nets: Sequence[Network],
    steps: Sequence[np.ndarray],
    optimizer: str = "adam",
    state: dict | None = None,
    block_bytes: int = 256,
    table: str = "embed.proj0.weight",
) -> dict:
    """Two workers (threads) train ``nets`` (:func:`sparse_table_net`) on ``endpoints``, step by
    step of row ids (rank r takes ``words[r::2]``), from optimizer ``state`` where given;
    returns the state rank 0 gathers from the shards at the end."""
    out = {}

    def rank_fn(rank: int) -> None:
        sync = PServerSync(
            create_optimizer(optimizer, lr=0.05),
            rank=rank,
            world_size=2,
            pservers=list(endpoints),
            insecure=True,
            timeout=30,
            block_bytes=block_bytes,
        )
        try:
            sync.setup(nets[rank].parameters(), state=state)
            for words in steps:
                mine = words[rank::2]
                sync.prefetch({table: mine})
                sync.start_step(len(mine))
                feed = {"words": Arg(ids=mine, needs_grad=False)}
                feed["label"] = Arg(ids=mine % 3, needs_grad=False)
                nets[rank].forward(feed)
                nets[rank].backward(sync, loss="loss", loss_scale=len(mine))
                sync.finish_step()
            if rank == 0:
                out["state"] = sync.state_dict()
        finally:
            sync.close()

    run_ranks(rank_fn, 2)
    return out["state"]


def raw_dealer(ctx: zmq.Context, endpoint: str) -> zmq.Socket:
    """A bare DEALER connected to a shard, for tests that write the wire by hand."""
    raw = ctx.socket(zmq.DEALER)
    raw.linger = 0
    raw.connect(f"tcp://{endpoint}")
    return raw


def assert_bad_push_refused_then_worker_served(
    shards, bad_frames: Callable[[dict, list], list], expect: str
) -> None:
    """A malformed push from a bare socket gets an error naming ``expect``; the shard then
    trains a real worker's step and answers a pull with that worker's values.

    ``bad_frames(head, blocks)`` builds the multipart push from a valid header for all of
    shard 0's blocks of parameter 0.
    """
    (endpoint,) = shards.start(1, workers=1)
    net, data = small_net(), batches(2, 8)
    sync = insecure_worker([endpoint])
    ctx = zmq.Context()
    raw = raw_dealer(ctx, endpoint)
    try:
        sync.setup(net.parameters())
        blocks = sync.layout.blocks_on(0, 0)
        head = {"op": "push", "id": 9, "job": "local", "rank": 0, "step": 1, "count": 1}
        head.update(lr=0.1, params=[0], blocks=[b.id for b in blocks], versions=[0] * len(blocks))
        raw.send_multipart(bad_frames(head, blocks))
        assert raw.poll(10_000), "the shard did not answer the bad push within 10 s"
        reply = raw.recv_multipart()
        error = unpack_header(reply[0], request=False)
        assert error["op"] == "error" and expect in error["error"], error
        train_steps(net, sync, data)  # the same step number, untouched by the refused push
        pull = pack({"op": "pull", "id": 10, "job": "local", "rank": 0, "blocks": [blocks[0].id]})
        raw.send_multipart(pull)
        assert raw.poll(10_000), "the shard did not answer the pull within 10 s"
        reply = raw.recv_multipart()
        (values,) = unpack_arrays(unpack_header(reply[0], request=False), reply[1:])
        b = blocks[0]
        np.testing.assert_array_equal(
            values.view(np.float64), net.parameters()[0].value.ravel()[b.start : b.stop]
        )
    finally:
        sync.close()
        raw.close(0)
        ctx.term()


def shard_values(endpoints: list[str], block_bytes: int = 64) -> dict[str, np.ndarray]:
    """Every parameter of the small net as the shards hold it now, by name, read with a pull of
    our own on a socket of its own (the workers' ``block_bytes``: 64 in insecure_worker and
    fit_worker.py)."""
    params = small_net().parameters()
    specs = [ParamSpec(p.name, tuple(p.shape), p.value.dtype.name) for p in params]
    layout = Layout(specs, len(endpoints), block_bytes)
    values = {p.name: np.full(p.shape, np.nan) for p in params}
    ctx = zmq.Context()
    try:
        for s, endpoint in enumerate(endpoints):
            blocks = layout.blocks_on(s)
            sock = raw_dealer(ctx, endpoint)
            head = {"op": "pull", "id": 1, "job": "local", "rank": 0}
            sock.send_multipart(pack({**head, "blocks": [b.id for b in blocks]}))
            assert sock.poll(20_000), f"shard {s} did not answer the pull within 20 s"
            reply = sock.recv_multipart()
            sock.close(0)
            header = unpack_header(reply[0], request=False)
            assert header["op"] == "ok", header
            (frame,) = unpack_arrays(header, reply[1:])
            flat, at = frame.view(np.float64), 0
            for b in blocks:
                spec = specs[b.param]
                n = (b.stop - b.start) * spec.row_len
                rows_view(values[spec.name], spec)[b.start : b.stop] = flat[at : at + n].reshape(
                    -1, spec.row_len
                )
                at += n
    finally:
        ctx.term()
    assert not any(np.isnan(v).any() for v in values.values())
    return values


def script_ranks(argv: Sequence[str], endpoint: str, seconds: float) -> list[tuple[int, str]]:
    """Run ``argv`` as ranks 0 and 1 of a 2-worker job of the shard at ``endpoint`` (insecure,
    one BLAS thread, ``DISTCONV_DEBUG`` unset); each rank's exit status and stderr, the ranks
    killed if they outlive ``seconds`` together. Their stderr goes to files, not pipes: a rank
    writing more than a pipe holds while the other is waited for would block both."""
    env = {**os.environ, "PYTHONPATH": child_path(), "OMP_NUM_THREADS": "1"}
    env.update(WORLD_SIZE="2", DISTCONV_PSERVERS=endpoint, DISTCONV_INSECURE="1")
    env.pop("DISTCONV_DEBUG", None)
    with tempfile.TemporaryFile("w+") as err0, tempfile.TemporaryFile("w+") as err1:
        errs = (err0, err1)
        ranks = [
            subprocess.Popen(
                list(argv),
                env={**env, "RANK": str(r)},
                stdout=subprocess.DEVNULL,
                stderr=errs[r],
                text=True,
            )  # fmt: skip
            for r in range(2)
        ]
        deadline = time.monotonic() + seconds
        try:
            for p in ranks:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
        finally:
            for p in ranks:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        for err in errs:
            err.seek(0)
        return [(p.returncode, err.read()) for p, err in zip(ranks, errs)]


@contextlib.contextmanager
def served(shard: Any) -> Iterator[Any]:
    """``shard`` (a :class:`~distconv.sync.ps.server.Shard`) bound to its configured address
    and served on a thread of this process, so that a test can read its state or change its
    optimizer; stopped, joined and closed after."""
    shard.bind()
    loop = threading.Thread(target=shard.serve, daemon=True)
    loop.start()
    try:
        yield shard
    finally:
        shard.stop()
        loop.join(10)
        shard.close()


@contextlib.contextmanager
def asked_to_stop() -> Iterator[None]:
    """Inside the ``with``, this process was asked to stop by SIGTERM, as the Trainer's handlers
    record it; the handlers are put back at its end."""
    request = StopRequest(announce=False)
    restore = request.install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while not request.received and time.monotonic() < deadline:
            time.sleep(0.01)  # the handler runs between bytecodes of the main thread
        assert request.received, "SIGTERM was not recorded"
        yield
    finally:
        restore()


def refused_without_writing(
    shards: Shards, tmp_path: Path, command: Callable[[int], list[str]], ask: Callable
) -> tuple[SyncError, list[str]]:
    """Two shards (``command(shard)``) and two Adam workers; rank 1 trains a step, so the
    shards move on from rank 0; then ``ask(rank 0's sync)`` must raise a ``SyncError`` and leave
    every value of rank 0's parameters as it was (no shard's reply half written). Returns the
    error and the shards' endpoints."""
    endpoints = [shards.launch(command(s), tmp_path / f"shard{s}.log") for s in range(2)]
    nets = [small_net(seed=r) for r in range(2)]
    syncs = [insecure_worker(endpoints, r, 2, optimizer="adam", timeout=10) for r in range(2)]
    try:
        run_ranks(lambda r: syncs[r].setup(nets[r].parameters()), 2)
        train_steps(nets[1], syncs[1], batches(1, 8), 1, 2)
        before = {p.name: p.value.copy() for p in nets[0].parameters()}
        with pytest.raises(SyncError) as refused:
            ask(syncs[0])
        after = {p.name: p.value for p in nets[0].parameters()}
    finally:
        for sync in syncs:
            sync.close()
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, name)
    return refused.value, endpoints


def assert_malformed_reply(
    error: BaseException, cause: str, endpoint: str, shard: int = 0, *, leads: bool = False
) -> None:
    """``error`` is rank 0's malformed-reply error, saying ``cause`` (right after its prefix
    where ``leads``) and naming shard ``shard`` at ``endpoint`` last."""
    said = str(error)
    prefix = "rank 0: malformed reply from a pserver: "
    assert said.startswith(prefix + cause if leads else prefix), said
    assert cause in said, said
    assert said.endswith(f" (pserver shard {shard} ({endpoint}))"), said


def pull_refused(endpoint: str) -> tuple[SyncError, dict[str, np.ndarray], list[int]]:
    """A worker of :func:`small_net` whose parameters are set to 7.0 (what a pull written would
    overwrite) pulls from ``endpoint``, which must refuse; the error, the values after and the
    block versions after."""
    net = small_net()
    sync = insecure_worker([endpoint])
    try:
        sync.setup(net.parameters())
        for p in net.parameters():
            p.value[...] = 7.0
        with pytest.raises(SyncError) as refused:
            sync._pull_all()
        values = {p.name: p.value.copy() for p in net.parameters()}
        return refused.value, values, list(sync._versions)
    finally:
        sync.close()


def small_block_sync(
    endpoints: list[str], rank: int = 0, world: int = 1, optimizer: str = "sgd", timeout: float = 10
) -> PServerSync:
    """An insecure ``PServerSync`` (lr 0.05) with 64-byte blocks, so even ``small_net``'s
    parameters span several blocks and shards."""
    return PServerSync(
        create_optimizer(optimizer, lr=0.05),
        rank=rank,
        world_size=world,
        pservers=endpoints,
        insecure=True,
        timeout=timeout,
        block_bytes=64,
    )
