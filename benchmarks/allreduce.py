"""MPISync against a raw fused ``Allreduce`` and ``torch.distributed`` (gloo), 2 ranks.

Usage: ``python benchmarks/allreduce.py [--mb 4] [--grads 100] [--reps 40] [--compute-ms 20]
[--overlap-bucket BYTES] [--epochs N] [--rotate 1] [--no-torch] [--no-cnn] [--cnn-pairs 3]
[--grad-dtype D] [--stream-only] [--update-only] [--accuracy]``

Every number is the median over ``--reps`` repetitions of the slowest rank's time, and every
ratio is against a baseline measured in the same run. Every case's buffers are written by the
CPU (untimed) before each call, as backward writes gradients (see :func:`written`). The cases
take turns, each repetition starting one case later (``--rotate 0``: always in the same order,
where the case after the largest buffers was seen to pay for their cache misses):

- **sync**: 100 gradients totalling 4 MB handed to :class:`MPISync` one by one, until every
  gradient is ready for the optimizer: the moment the (no-op) optimizer is handed the first
  gradient after the last reduction (the optimizer averages them itself, ``grad_scale``). The
  per-step check is posted before the window (completed inside it, before the first reduction,
  it has arrived by then; ``with_check`` times the whole of it); the optimizer and the zeroing
  after it are timed apart
  (``whole``: until ``finish_step`` returns; ``whole_sgd``, ``whole_momentum``,
  ``whole_adam``: the same with a real optimizer, so the whole step). Against one raw
  ``Allreduce`` of a fused 4 MB buffer. Target <= 1.1x.
  ``before`` is MPISync's default before a bucket went in one call without the thread: uniform
  1 MiB pieces, each going as soon as the gradients under it are in; ``after`` is the default
  (with the gradients handed over back to back; **streaming** below adds compute between
  them).
  ``plan_*`` rows vary the plan. The old ``floor``, the raw call followed by one
  averaging pass over its buffer, was what the sync could reach while it averaged in a pass of
  its own.
- **gloo**: ``torch.distributed`` with gloo (DDP's CPU backend) on one fused 4 MB buffer, as
  DDP's buckets are, and as 100 separate calls. Target: the sync >= 2x faster than fused gloo.
- **overlap, free cores**: a backward pass simulated by a sleep per gradient (a GPU kernel that
  leaves the core free), buckets of ``--overlap-bucket`` bytes (default 4 MiB, MPISync's).
  Exposed communication = step time - compute-only step time, as a share of the same step's
  communication alone. Target <= 20 %. Beside the default (pieces handed to the thread as they
  fill, the last one small): the thread waiting in ``MPI_Wait``; ``whole``, the behaviour
  before streaming (``stream=False`` and a full-size last piece: each bucket's pieces handed
  over once it is complete, which with one 4 MiB bucket for the whole layout overlaps
  nothing); the default with a full-size last piece; the same step with MPISync on one
  rank (no communication at all: what the sync's own Python adds to the compute-only step);
  and the same step as one process trains it (:class:`~distconv.sync.local.LocalSync`, the
  optimizer called on each gradient and the gradient zeroed), against which exposed
  communication is reported too: that step, not the bare compute, is what distributing the
  job adds communication to.
- **overlap, full cores**: the same with numpy compute on every core (a fixed amount, two
  96x96 products a gradient, whatever ``--compute-ms`` says); the overlap machinery
  (``overlap=None``, which turns the thread off where ranks fill the cores) may not make the
  step slower than without it. The thread forced on is reported too. Where ``overlap=None``
  turned the thread off, its row is the very configuration of "without" and is printed without
  the target.
- **streaming**: one 4 MiB bucket (no thread) with compute between the gradients (none, a
  sleep, numpy): four 1 MiB pieces going as their gradients arrive, and the bucket in one call
  (the default), each against the four pieces waiting for the whole bucket, as paired ratios
  (``--stream-only`` runs these alone).
- **updates**: the step of **overlap, free cores** with a real update, over 1 MiB buckets
  (five over the default 4 MB): the thread on, paired against the same step without it, over
  the same pieces (the thread's default: the layout's last bucket cut small at its end)
  (``update_{rule}_thread_x``, the median of each repetition's ratio). Without the thread every
  bucket is reduced before any is updated; with it each bucket's update could run while the
  later buckets still travelled, which the no-op optimizer of the rows above cannot show. For
  Adam on the CPU, and for ``free``, an update that leaves the core free as a GPU kernel does (a
  sleep of ``FREE_UPDATE_SECONDS`` per parameter). ``--update-only`` runs these alone.
- **float16 wire**: the bytes handed to the collectives and the time, against float32.
- **CNN**: the default LeNet on the digits, 2 ranks x 1 BLAS thread against 1 x 1 (LocalSync),
  samples per second (the median over the default job's epochs; ``--grad-dtype D``: the 2-rank
  runs' wire). Target >= 1.8x. The two run
  alternated, ``--cnn-pairs`` pairs (3; each pair's order the other way round from the last),
  and the ratio reported is the median pair's, with the range: one lone run that reads slow on
  a shared machine no longer decides the verdict. Beside it,
  two 1-rank trainings run side by side with no communication: their sum over one is what the
  cores allow, and the 2-rank job is reported against it too.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
# one BLAS thread per rank, before numpy is imported. No DISTCONV_NUM_THREADS: the MPI rows
# run no distconv kernels, and a count set by hand makes the communication thread poll rather
# than wait in MPI_Wait (its cores may be another job's); the rows get the choice of a job that
# sets none, as every recorded run on 2 cores had it. On a host of more cores than ranks that
# choice counts the cores as the kernels' and runs no thread (``auto``), where a count of 1 set
# by hand had it run one: compare rows of such hosts with each other only. The CNN's jobs, which
# run the kernels, set theirs (ONE_THREAD)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402
from harness import killed_with_this_process  # noqa: E402

MB = 1 << 20


# -- the MPI side (runs under mpiexec) -----------------------------------------------------------
def interleaved(
    comm, cases: dict, reps: int, warmup: int = 3, base: str = "", rotate: bool = False
) -> dict[str, float]:
    """Median milliseconds of the slowest rank for each case, the cases taking turns.

    Returns ``{case}_ms``, and with ``base`` (a case) also ``{case}_x``: the median over the
    repetitions of the case's time over ``base``'s in the same repetition, which drifting load
    disturbs less than a ratio of medians.

    ``cases`` maps a name to ``(before, timed, after)`` (``before``/``after`` untimed, may be
    None; ``timed`` may return the ``time.perf_counter()`` at which its window ended). Taking
    turns in every repetition spreads the load of a shared machine evenly over the cases, so
    their ratios hold even when the absolute times drift. ``rotate``: each repetition starts one
    case later, so that no case always runs in the same place (the first case of a repetition
    was seen to run up to 1.5x slower with numpy compute).
    """
    from mpi4py import MPI

    times: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for i in range(warmup + reps):
        turn = i % len(names) if rotate else 0
        for name in names[turn:] + names[:turn]:
            before, timed, after = cases[name]
            if before is not None:
                before()
            comm.Barrier()
            start = time.perf_counter()
            end = timed()  # a case may say when its window ended (a perf_counter reading)
            elapsed = np.array([(end if isinstance(end, float) else time.perf_counter()) - start])
            if after is not None:
                after()
            comm.Allreduce(MPI.IN_PLACE, elapsed, MPI.MAX)
            if i >= warmup:
                times[name].append(elapsed[0])
    out = {f"{name}_ms": float(np.median(t) * 1e3) for name, t in times.items()}
    if base:
        out.update(
            {f"{k}_x": float(np.median(np.divide(t, times[base]))) for k, t in times.items()}
        )
    return out


def written(*buffers):
    """An untimed ``before`` for :func:`interleaved`: ``buffers`` (numpy arrays or torch
    tensors) filled with ones, as backward writes gradients before they are reduced.

    Every case's buffers are written so, by the CPU, before each call: the baselines as much as
    the sync's gradients, so that no side reduces a buffer in another state of the caches (for
    a while one window saw a 4 MB call on a buffer MPI had written last take twice as long;
    later runs did not, see docs/benchmarks-history.md). Ones also keep repeated sums from
    growing to inf.
    """

    def write() -> None:
        for b in buffers:
            if isinstance(b, np.ndarray):
                b.fill(1.0)
            else:  # a torch tensor
                b.fill_(1.0)

    return write


#: the real optimizers timed for the whole step, before and after (by name in the report)
WHOLE_STEP_RULES = ("sgd", "momentum", "adam")


def layout_bytes(args) -> int:
    """The bytes of the gradients' layout: ``--mb`` (a float, as ``pserver.py``'s) in bytes."""
    return int(args.mb * MB)


def mib_calls(nbytes: int) -> list[int]:
    """The bytes of each call of the ``raw_pieces`` row: the fused buffer of ``nbytes`` cut at
    every MiB, the last call what is left (``--mb`` takes decimals: 1.5 is 1 MiB, then half)."""
    return [MB] * (nbytes // MB) + ([nbytes % MB] if nbytes % MB else [])


def mib_calls_label(mb: float) -> str:
    """The ``raw_pieces`` row's label, naming the calls :func:`mib_calls` made of ``mb``."""
    *whole, last = mib_calls(int(mb * MB) // 4 * 4) or [0]
    if last == MB:
        return "raw Allreduce, fused buffer as 1 MiB calls"
    if not whole:
        return f"raw Allreduce, fused buffer as one {last / MB:.3g} MiB call"
    return f"raw Allreduce, fused buffer as 1 MiB calls, the last {last / MB:.3g} MiB"


def make_params(total_bytes: int, grads: int):
    """``grads`` float32 parameters of (almost) equal size totalling ``total_bytes``."""
    from distconv.parameter import Parameter

    n = total_bytes // 4
    sizes = [n // grads + (i < n % grads) for i in range(grads)]
    return [Parameter(f"g{i:03d}", np.ones(s, np.float32)) for i, s in enumerate(sizes)]


def no_update():
    """An optimizer that does nothing but note when it is handed the ``watch`` parameter."""
    from distconv.optim import Optimizer

    class NoUpdate(Optimizer):
        name = "none"
        watch, ready_at = None, 0.0

        def _apply(self, value, grad, state, scale):
            if value is self.watch:
                self.ready_at = time.perf_counter()

    return NoUpdate(lr=1.0)


#: the updates of the **updates** rows: Adam on the CPU, and ``free``, one leaving the core free
UPDATE_RULES = ("adam", "free")
#: the ``free`` update's sleep per parameter: a GPU kernel's launch and run, the core left free
FREE_UPDATE_SECONDS = 50e-6


def free_update():
    """An optimizer whose update leaves the core free, as one on a GPU does: a sleep of
    :data:`FREE_UPDATE_SECONDS` per parameter, the parameter untouched."""
    from distconv.optim import Optimizer

    class FreeUpdate(Optimizer):
        name = "free"

        def _apply(self, value, grad, state, scale):
            time.sleep(FREE_UPDATE_SECONDS)

    return FreeUpdate(lr=1.0)


def before_sync():
    """MPISync as its default was before a bucket went in one call without the thread: uniform
    1 MiB pieces, each streamed as soon as its gradients are in."""
    from distconv.sync.mpi import MPISync

    class BeforeSync(MPISync):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, first_piece_bytes=MB, piece_bytes=MB, **kwargs)

    return BeforeSync


def make_sync(comm, args, kind=None, optimizer=None, **options):
    """An MPISync (or ``kind``) over fresh parameters, set up, with the gradients' firing order;
    the optimizer does nothing unless one is given."""
    from distconv.sync.mpi import MPISync

    sync = (kind or MPISync)(optimizer or no_update(), comm=comm, **options)
    return set_up(sync, args)


def local_sync(args):
    """A :class:`~distconv.sync.local.LocalSync` with the do-nothing optimizer over fresh
    parameters, and the gradients' order: single-process training's step."""
    from distconv.sync.local import LocalSync

    return set_up(LocalSync(no_update()), args)


def set_up(sync, args):
    """``sync`` set up over fresh parameters, and the order backward fires them in (the
    layout's)."""
    params = make_params(layout_bytes(args), args.grads)
    sync.setup(params, {})
    return sync, list(reversed(params))


def sync_case(sync, order, compute=None, *, check_timed=False, until_ready=False):
    """A case for :func:`interleaved`: one step; the per-step check timed or not; the window
    ending when ``finish_step`` returns or (``until_ready``) when the last bucket's averaged
    gradients reach the optimizer."""

    def gradients():
        for i, p in enumerate(order):
            if compute is not None:
                compute(i)
            sync.on_gradient(p)
        sync.finish_step()
        return sync.optimizer.ready_at if until_ready else None

    def write():  # as backward writes them; the views of this step (the thread swaps buffers)
        written(*(p.grad for p in order))()

    def start():
        # every gradient is reduced before the first update, unless each bucket's update
        # follows its own wait (the communication thread)
        if until_ready:
            watched = sync.buckets[-1 if sync.overlap else 0].params[0].value
            sync.optimizer.watch = watched
        sync.start_step(1)

    if check_timed:  # the gradients' writes stay untimed
        return write, lambda: (start(), gradients())[1], None
    return lambda: (write(), start()), gradients, None


def wire_bytes(comm, args, grad_dtype):
    """Bytes one step's gradient collectives send, counted from the buffers handed to MPI."""
    from mpi4py import MPI

    from distconv.sync.mpi import DEFAULT_BUCKET_BYTES, CountingComm

    counting = CountingComm(comm, MPI.IN_PLACE)
    sync, order = make_sync(
        counting, args, bucket_bytes=DEFAULT_BUCKET_BYTES, overlap=False, grad_dtype=grad_dtype
    )
    sync_case(sync, order)[0]()
    sync_case(sync, order)[1]()
    sync.close()
    return sum(d.sent for d in counting.duplicates)


def mpi_worker(args) -> None:
    from mpi4py import MPI

    from distconv.optim import SGD, create_optimizer
    from distconv.sync.mpi import DEFAULT_BUCKET_BYTES

    comm = MPI.COMM_WORLD
    fused = np.ones(layout_bytes(args) // 4, np.float32)
    pieces = [p.value for p in make_params(layout_bytes(args), args.grads)]
    ones = fused.copy()  # stays ones: summed over the ranks, then averaged
    # cut at every MiB (np.array_split into nbytes // MB parts made 1.5 MB one 1.5 MiB call)
    mib_pieces = np.split(fused.copy(), np.cumsum(mib_calls(fused.nbytes))[:-1] // 4)
    half = 1.0 / comm.size  # 2 ranks x 1 example: an exact product, as MPISync averages then
    cases = {
        "raw_fused": (written(fused), lambda: comm.Allreduce(MPI.IN_PLACE, fused, MPI.SUM), None),
        "raw_fused_average": (
            written(ones),
            lambda: (comm.Allreduce(MPI.IN_PLACE, ones, MPI.SUM), np.multiply(ones, half, ones)),
            None,
        ),
        "raw_pieces": (  # the fused buffer as 1 MiB calls, as MPISync sends a bucket
            written(*mib_pieces),
            lambda: [comm.Allreduce(MPI.IN_PLACE, piece, MPI.SUM) for piece in mib_pieces],
            None,
        ),
        "raw_separate": (
            written(*pieces),
            lambda: [comm.Allreduce(MPI.IN_PLACE, g, MPI.SUM) for g in pieces],
            None,
        ),
    }
    syncs = {
        "default": dict(bucket_bytes=DEFAULT_BUCKET_BYTES),
        "1MiB": dict(bucket_bytes=MB, overlap=False),
        "1MiB+thread": dict(bucket_bytes=MB, overlap=True),
        "256KiB": dict(bucket_bytes=MB // 4, overlap=False),
        "float16": dict(bucket_bytes=DEFAULT_BUCKET_BYTES, overlap=False, grad_dtype="float16"),
    }
    for name, (first, largest) in PLANS.items():
        syncs[name] = dict(overlap=False, first_piece_bytes=first, piece_bytes=largest)
    if importlib.util.find_spec("ml_dtypes") is not None:
        syncs["bfloat16"] = {**syncs["float16"], "grad_dtype": "bfloat16"}
    out, made = {}, []
    for name, options in syncs.items():
        sync, order = make_sync(comm, args, **options)
        made.append(sync)
        cases[f"sync_{name}"] = sync_case(sync, order, until_ready=True)
        out[f"sync_{name}_buckets"] = len(sync.buckets)
    for when, kind in (("before", before_sync()), ("after", None)):
        # no thread: the previous MPISync pumps its pieces on the main thread
        options = dict(bucket_bytes=DEFAULT_BUCKET_BYTES, overlap=False)
        sync, order = make_sync(comm, args, kind, **options)
        made.append(sync)
        cases[f"{when}_ready"] = sync_case(sync, order, until_ready=True)
        cases[f"{when}_whole"] = sync_case(sync, order)
        for rule in WHOLE_STEP_RULES:
            optimizer = create_optimizer(rule, lr=1e-6)
            sync, order = make_sync(comm, args, kind, optimizer, **options)
            made.append(sync)
            cases[f"{when}_whole_{rule}"] = sync_case(sync, order)
    check, order = make_sync(comm, args, bucket_bytes=DEFAULT_BUCKET_BYTES, overlap=False)
    cases["sync_default_with_check"] = sync_case(check, order, check_timed=True, until_ready=True)
    sgd = SGD(lr=0.01)
    cases["optimizer"] = (None, lambda: [sgd.update(g, g, {}) for g in pieces], None)
    out.update(interleaved(comm, cases, args.reps, base="raw_fused", rotate=args.rotate))
    for sync in [*made, check]:
        sync.close()
    out.update(alone_pair(comm, args, cases["raw_fused"]))
    out["wire_bytes_float32"] = wire_bytes(comm, args, "float32")
    out["wire_bytes_float16"] = wire_bytes(comm, args, "float16")
    if importlib.util.find_spec("ml_dtypes") is not None:
        out["wire_bytes_bfloat16"] = wire_bytes(comm, args, "bfloat16")
    out.update(
        overlap(comm, args, "free", lambda i, t=args.compute_ms / 1e3 / args.grads: time.sleep(t))
    )
    out.update(overlap(comm, args, "full", numpy_compute(comm, args)))
    out.update(streaming(comm, args))
    out.update(updates(comm, args))
    if comm.rank == 0:
        print(json.dumps(out))


def alone_pair(comm, args, raw_fused) -> dict:
    """The target's comparison on its own: MPISync's default and the raw fused call taking
    turns with nothing else between them (in the main table each case follows a different
    one, and that row moved between 1.0 and 1.7 with no change to the sync). As in the main
    table's default row, the per-step check is posted untimed (``start_step``). ``alone_x``:
    the median of each repetition's ratio."""
    from distconv.sync.mpi import DEFAULT_BUCKET_BYTES

    sync = None
    try:
        sync, order = make_sync(comm, args, bucket_bytes=DEFAULT_BUCKET_BYTES)
        pair = {"raw_fused": raw_fused, "sync": sync_case(sync, order, until_ready=True)}
        got = interleaved(comm, pair, args.reps, base="raw_fused", rotate=args.rotate)
    finally:
        if sync is not None:
            sync.close()
    return {"alone_x": got["sync_x"], "alone_sync_ms": got["sync_ms"]}


def streaming(comm, args) -> dict:
    """Pieces going as their gradients arrive (``stream=True``) against each waiting for its
    whole bucket, with compute between the gradients: one 4 MiB bucket of four 1 MiB pieces, no
    thread (the main thread moves the pieces on at each gradient); and the bucket in one call
    (``one``, the default without the thread). ``stream_{kind}_on_x`` is the median of each
    repetition's on / off ratio; ``kind``: ``none`` (no compute), ``free`` (a sleep per
    gradient) or ``full`` (numpy on the rank's core)."""
    from distconv.sync.mpi import DEFAULT_BUCKET_BYTES

    sleep = args.compute_ms / 1e3 / args.grads
    computes = {
        "none": None,
        "free": lambda i: time.sleep(sleep),
        "full": numpy_compute(comm, args),
    }
    out, made = {}, []
    for kind, compute in computes.items():
        cases = {}
        if compute is not None:
            only = lambda c=compute: [c(i) for i in range(args.grads)]  # noqa: E731
            cases[f"stream_{kind}_compute"] = (None, only, None)
        pieces = dict(first_piece_bytes=MB, piece_bytes=MB)
        for name, plan in (("off", dict(pieces, stream=False)), ("on", pieces), ("one", {})):
            options = dict(bucket_bytes=DEFAULT_BUCKET_BYTES, overlap=False, **plan)
            sync, order = make_sync(comm, args, **options)
            made.append(sync)
            cases[f"stream_{kind}_{name}"] = sync_case(sync, order, compute)
        out.update(interleaved(comm, cases, args.reps, base=f"stream_{kind}_off", rotate=True))
    for sync in made:
        sync.close()
    return out


def updates(comm, args) -> dict:
    """The step with a real update (``UPDATE_RULES``) over 1 MiB buckets and a sleep per gradient
    (free cores), the thread on (``update_{rule}_thread``) against off (``..._nothread``, the
    paired baseline): with the thread the updates of the buckets reduced first could run while
    the last ones travelled, which the no-op optimizer of the other rows cannot show.

    Both lay out the same pieces, the thread's default (``update_{rule}_{name}_pieces``, the
    slices of each bucket): left to its own default the baseline reduced the layout's last
    bucket in one call, where the thread cuts its end small, and the ratio measured that too."""
    from distconv.optim import create_optimizer
    from distconv.sync.mpi.pieces import LAST_PIECE_BYTES, PIECE_BYTES

    sleep = args.compute_ms / 1e3 / args.grads
    plan = dict(bucket_bytes=MB, piece_bytes=PIECE_BYTES, last_piece_bytes=LAST_PIECE_BYTES)
    out, made = {}, []
    for rule in UPDATE_RULES:
        cases = {}
        for name, thread in (("nothread", False), ("thread", True)):
            optimizer = free_update() if rule == "free" else create_optimizer(rule, lr=1e-6)
            sync, order = make_sync(comm, args, optimizer=optimizer, overlap=thread, **plan)
            made.append(sync)
            cases[f"update_{rule}_{name}"] = sync_case(sync, order, lambda i: time.sleep(sleep))
            out[f"update_{rule}_{name}_pieces"] = [
                [[piece.start, piece.stop] for piece in bucket.pieces] for bucket in sync.buckets
            ]
        out[f"update_{rule}_buckets"] = len(sync.buckets)
        out.update(interleaved(comm, cases, args.reps, base=f"update_{rule}_nothread", rotate=True))
    for sync in made:
        sync.close()
    return out


def update_worker(args) -> None:
    from mpi4py import MPI

    out = updates(MPI.COMM_WORLD, args)
    if MPI.COMM_WORLD.rank == 0:
        print(json.dumps(out))


def stream_worker(args) -> None:
    from mpi4py import MPI

    out = streaming(MPI.COMM_WORLD, args)
    if MPI.COMM_WORLD.rank == 0:
        print(json.dumps(out))


def numpy_compute(comm, args):
    """CPU work on the rank's one BLAS thread: two 96x96 float64 products a gradient, a fixed
    amount: ``--compute-ms`` sizes the sleeps, not this (sized by it, the full-cores rows of
    every earlier run would no longer compare with a new one's)."""
    a = np.random.default_rng(comm.rank).standard_normal((96, 96))
    return lambda i: [a @ a for _ in range(2)]


def overlap(comm, args, kind: str, compute) -> dict:
    """Compute-only step, then the step with the sync without and with the thread."""
    from distconv.sync.mpi import SingleRankComm

    cases = {f"{kind}_compute": (None, lambda: [compute(i) for i in range(args.grads)], None)}
    made = []
    variants = {"thread0": False, "thread1": True, "auto": None}  # auto: MPISync's choice here
    for name, thread in variants.items():
        sync, order = make_sync(comm, args, bucket_bytes=args.overlap_bucket, overlap=thread)
        made.append(sync)
        cases[f"{kind}_step_{name}"] = sync_case(sync, order, compute)
    auto_chose = bool(made[-1].overlap)
    if kind == "free":
        extra = {
            "spin": dict(poll_seconds=0.0),  # waiting in MPI_Wait, as with a core to spare
            # the behaviour before streaming: every piece of a bucket waits for the whole bucket,
            # no small last piece; with the default 4 MiB bucket (the whole layout) nothing
            # overlaps, so this is the communication-after-backward baseline
            "whole": dict(stream=False, last_piece_bytes=MB),
            "last1MiB": dict(last_piece_bytes=MB),  # pieces streamed, the last a full one
        }
        for name, options in extra.items():
            sync, order = make_sync(
                comm, args, bucket_bytes=args.overlap_bucket, overlap=True, **options
            )
            made.append(sync)
            cases[f"{kind}_step_{name}"] = sync_case(sync, order, compute)
        # the same step with no communication at all (MPISync on one rank, the thread on):
        # what the sync's own Python costs beside compute, which the compute-only step omits
        alone = SingleRankComm()
        sync, order = make_sync(alone, args, bucket_bytes=args.overlap_bucket, overlap=True)
        made.append(sync)
        cases[f"{kind}_step_local"] = sync_case(sync, order, compute)
        # the step as one process trains it (LocalSync: the optimizer on each gradient as it
        # comes, the gradient zeroed): the step that distribution adds communication to
        single, order = local_sync(args)
        made.append(single)
        cases[f"{kind}_step_single"] = sync_case(single, order, compute)
    comm_only, order = make_sync(comm, args, bucket_bytes=args.overlap_bucket, overlap=False)
    made.append(comm_only)
    cases[f"{kind}_comm"] = sync_case(comm_only, order)
    out = interleaved(comm, cases, args.reps, rotate=args.rotate)
    out[f"{kind}_auto_thread"] = auto_chose
    for sync in made:
        sync.close()
    return out


# -- torch.distributed with gloo ------------------------------------------------------------------
def gloo_worker(args) -> None:
    """Under mpiexec: gloo fused and separate, MPISync and the raw MPI call, taking turns."""
    import torch
    import torch.distributed as dist
    from mpi4py import MPI

    from distconv.sync.mpi import DEFAULT_BUCKET_BYTES

    comm = MPI.COMM_WORLD
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=comm.rank, world_size=comm.size)
    n = layout_bytes(args) // 4
    fused, raw = torch.ones(n), np.ones(n, np.float32)
    pieces = gradient_pieces(torch.ones(n), args.grads)
    sync, order = make_sync(comm, args, bucket_bytes=DEFAULT_BUCKET_BYTES)
    cases = {
        "gloo_fused": (written(fused), lambda: dist.all_reduce(fused), None),
        "gloo_separate": (written(*pieces), lambda: [dist.all_reduce(p) for p in pieces], None),
        "gloo_run_sync_default": sync_case(sync, order, until_ready=True),
        "gloo_run_raw_fused": (
            written(raw),
            lambda: comm.Allreduce(MPI.IN_PLACE, raw, MPI.SUM),
            None,
        ),
    }
    out = interleaved(comm, cases, args.reps)
    sync.close()
    if comm.rank == 0:
        print(json.dumps(out))
    dist.destroy_process_group()


def gradient_pieces(fused, grads: int) -> list:
    """``fused`` (a 1-d torch tensor) as the ``grads`` gradients ``gloo_separate`` reduces one
    call each, of :func:`make_params`'s sizes (the first ``n % grads`` one float longer).
    ``split(ceil(n / grads))`` made fewer: 150 floats over 100 gradients, 75 calls."""
    return list(fused.tensor_split(grads))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the default CNN ------------------------------------------------------------------------------
def cnn_worker(args) -> None:
    """Train the default LeNet on the digits (``distconv.job.train``); print its speed.

    Samples per second: the median over epochs of the training rate the trainer logs (global,
    evaluation excluded).
    """
    from distconv.job import TrainConfig, train

    options = {"grad_dtype": args.grad_dtype} if args.grad_dtype else {}
    config = TrainConfig(epochs=args.epochs, sync=args.sync, sync_options=options, progress=False)
    trainer = train(config)
    if trainer.sync.rank == 0:
        rates = [r["examples_per_second"] for r in trainer.history]
        record = {"samples_per_s": float(np.median(rates))}
        record["test_acc"] = trainer.history[-1].get("test_acc")
        record["wire"] = getattr(trainer.sync, "wire_bytes", 0)
        record["grad_dtype"] = getattr(trainer.sync, "grad_dtype", None) or "float32"
        print(json.dumps(record))


# -- the driver ---------------------------------------------------------------------------------
#: the CNN comparison is 2 ranks x 1 BLAS thread against 1 x 1 (the issue's setting, and what
#: ``distconv-launch --threads 1`` sets): unpinned, 2 ranks x 2 threads oversubscribe 2 cores
ONE_THREAD = dict.fromkeys(
    ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "DISTCONV_NUM_THREADS"), "1"
)


def mpiexec(n: int, worker: str, args, extra=()) -> dict:
    """``worker`` under ``mpiexec -n N``: the JSON record its rank 0 prints last."""
    return together([(n, extra)], worker, args)[0]


def together(jobs, worker: str, args) -> list[dict]:
    """Jobs ``(n, extra)`` of ``worker``, each under an ``mpiexec`` of its own, all started at
    once (two independent trainings side by side: what the cores allow without communication).
    """
    cmd = [sys.executable, "-m", "mpi4py", __file__, "--worker", worker]
    cmd += [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if k in PASSED]
    env = {**os.environ, **(ONE_THREAD if worker == "cnn" else {})}
    procs = [
        subprocess.Popen(
            ["mpiexec", "-n", str(n), *cmd, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            # a group of its own, killed whole below: mpiexec and its proxy (hydra gives each
            # rank a session of its own; a rank ends as its proxy dies)
            start_new_session=True,
            # and mpiexec killed as the driver ends, even SIGKILLed: no finally runs then
            preexec_fn=killed_with_this_process(),
        )
        for n, extra in jobs
    ]
    try:
        records = []
        for proc in procs:
            out, err = proc.communicate(timeout=1200)
            if proc.returncode != 0:
                raise RuntimeError(f"mpiexec {worker} failed:\n{err}")
            records.append(json.loads(out.strip().splitlines()[-1]))
        return records
    finally:
        # one job failed or hung: the others must not train on after the driver has gone,
        # loading the cores under whatever is measured next
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()


#: piece plans beside the default (one call per bucket without the thread): first and largest
#: bytes
PLANS = {
    "plan uniform 1 MiB pieces": (MB, MB),
    "plan 1 MiB first, then 3": (MB, 4 * MB),
    "plan 256 KiB first, up to 1 MiB": (MB // 4, MB),
}
PASSED = ("mb", "grads", "reps", "compute_ms", "overlap_bucket", "epochs", "rotate")


def cnn_pairs(args) -> dict:
    """1 rank (LocalSync) and 2 ranks (MPISync) of the default CNN, ``args.cnn_pairs`` times
    alternated (1 then 2, 2 then 1, ...): every pair's speeds, and as ``cnn1``/``cnn2`` the
    records of the pair whose ratio is the median. ``--grad-dtype`` is the 2-rank runs' wire
    (the 1-rank run has none): ``PASSED`` leaves it out, as the 1-rank run must not get it."""
    wire = ["--grad-dtype", args.grad_dtype] if args.grad_dtype else []
    pairs = []
    for i in range(args.cnn_pairs):
        runs = [(1, ["--sync", "local"]), (2, ["--sync", "mpi", *wire])][:: 1 if i % 2 == 0 else -1]
        records = {n: mpiexec(n, "cnn", args, extra) for n, extra in runs}
        pairs.append((records[2]["samples_per_s"] / records[1]["samples_per_s"], records))
    _, median = sorted(pairs, key=lambda pair: pair[0])[len(pairs) // 2]
    speeds = [{"one": rec[1]["samples_per_s"], "two": rec[2]["samples_per_s"]} for _, rec in pairs]
    return {"cnn1": median[1], "cnn2": median[2], "cnn_pairs": speeds}


def report(r: dict) -> None:
    """The main job's table and lines (:func:`mpi_worker`), printed as soon as it is measured:
    the gloo and CNN rows follow (:func:`report_gloo`, :func:`report_cnn`); its labels name
    the run's sizes (``mb``, ``grads``)."""
    fused, mb, grads = r["raw_fused_ms"], f"{r['mb']:g}", r["grads"]
    rows = [(f"raw Allreduce, fused {mb} MB", "raw_fused", "baseline")]
    rows.append((f"raw Allreduce, {grads} calls", "raw_separate", ""))
    rows.append(("raw Allreduce, fused, then averaged", "raw_fused_average", "old floor"))
    rows.append((mib_calls_label(r["mb"]), "raw_pieces", ""))
    for name in ("default", *PLANS, "1MiB", "1MiB+thread", "256KiB", "float16", "bfloat16"):
        if f"sync_{name}_ms" not in r:
            continue
        # the target docs/benchmarks.md quotes: this row's paired column, not the alone line
        note = "target <= 1.1x, paired" if name == "default" else ""
        rows.append((f"MPISync {name} ({r[f'sync_{name}_buckets']} buckets)", f"sync_{name}", note))
    rows.append(("MPISync default + per-step check", "sync_default_with_check", ""))
    for when in ("before", "after"):
        rows.append((f"{when}: until ready for the optimizer", f"{when}_ready", "no-op optimizer"))
        rows.append((f"{when}: whole finish_step (+zeroing)", f"{when}_whole", "no-op optimizer"))
        for rule in WHOLE_STEP_RULES:
            rows.append((f"{when}: whole step with {rule}", f"{when}_whole_{rule}", ""))
    rows.append((f"SGD update of {mb} MB (apart)", "optimizer", ""))
    # the x-fused column is a ratio of medians; "paired" the median of each repetition's ratio
    print(f"{'what':42s} {'ms':>8s} {'x fused':>8s} {'paired':>8s}")
    for label, key, note in rows:
        ms = r[f"{key}_ms"]
        print(f"{label:42s} {ms:8.3f} {ms / fused:8.2f} {r[f'{key}_x']:8.2f}  {note}")
    for window in ("ready", "whole", *(f"whole_{rule}" for rule in WHOLE_STEP_RULES)):
        ratio = r[f"after_{window}_ms"] / r[f"before_{window}_ms"]
        paired = r[f"after_{window}_x"] / r[f"before_{window}_x"]
        print(f"after / before, {window}: {ratio:.3f} (paired with the raw call: {paired:.3f})")
    print(
        f"MPISync default / raw fused, alone: the two taking turns with nothing between (check "
        f"posted untimed), each repetition's ratio: {r['alone_x']:.2f}x "
        f"({r['alone_sync_ms']:.3f} ms; the target is the table's paired column)"
    )
    floor = r["sync_default_ms"] / r["raw_fused_average_ms"]
    print(f"MPISync default / (raw fused Allreduce + one averaging pass): {floor:.3f}")
    for dtype in ("float16", "bfloat16")[: 1 + ("wire_bytes_bfloat16" in r)]:
        half = r[f"wire_bytes_{dtype}"] / r["wire_bytes_float32"]
        print(f"bytes sent per step (counted at the MPI buffers), {dtype} / float32: {half:.3f}")
    for kind in ("free", "full"):
        compute, comm = r[f"{kind}_compute_ms"], r[f"{kind}_comm_ms"]
        off, on = r[f"{kind}_step_thread0_ms"], r[f"{kind}_step_thread1_ms"]
        # the free cores' compute is a sleep per gradient: named as docs/benchmarks.md does
        what = "the sleeps took" if kind == "free" else "compute"
        asked = f" ({r['compute_ms']:g} ms asked)" if kind == "free" and "compute_ms" in r else ""
        print(
            f"{kind} cores: {what} {compute:.2f} ms{asked}, communication alone {comm:.2f} ms, "
            f"step without thread {off:.2f} ms, with {on:.2f} ms"
        )
        if kind == "free":
            print(
                f"  exposed communication with the thread: {exposed(on, compute, comm)} "
                f"(without: {exposed(off, compute, comm)}); target <= 20 %"
            )
            single = r["free_step_single_ms"]
            over = f"{single - compute:.2f} over compute" if single >= compute else NOISE
            print(
                f"  against the same step trained by one process (LocalSync, {single:.2f} ms, "
                f"{over}): {(on - single) / comm:.0%} exposed"
            )
            local = r["free_step_local_ms"]
            share = f"{(local - compute) / comm:.0%} of the communication time"
            print(
                "  the same step on one rank, no communication at all: "
                + (
                    f"{local - compute:.2f} ms over compute ({share}: the sync's own Python)"
                    if local >= compute
                    else NOISE
                )
            )
            for name, label in (
                ("spin", "the thread waiting in MPI_Wait (poll_seconds=0)"),
                ("whole", "before streaming: stream=False, full last piece (no overlap)"),
                ("last1MiB", "pieces streamed to the thread, the last 1 MiB"),
            ):
                share = exposed(r[f"free_step_{name}_ms"], compute, comm)
                print(f"  {label}: {share}{' exposed' if share != NOISE else ''}")
        else:
            print(f"  step with thread / without: {on / off:.3f}")
        auto = r[f"{kind}_step_auto_ms"]
        if r[f"{kind}_auto_thread"]:
            print(f"  overlap=None (the thread on here) / without: {auto / off:.3f} (target <= 1)")
        else:  # the very configuration of "without": the ratio is noise, not a result
            print(f"  overlap=None turns the thread off here, as without: {auto / off:.3f}")
    if "stream_none_on_ms" in r:
        report_streaming(r)
    report_updates(r)


def report_gloo(r: dict) -> None:
    """The gloo rows (:func:`gloo_worker`'s run), each scaled by the raw call of its own run
    to the main table's (:func:`report`)."""
    fused, mb = r["raw_fused_ms"], f"{r['mb']:g}"
    scale = fused / r["gloo_run_raw_fused_ms"]  # its own run: scaled by the raw call there
    for label, key in ((f"fused {mb} MB", "gloo_fused"), (f"{r['grads']} calls", "gloo_separate")):
        ms = r[f"{key}_ms"] * scale
        print(f"{'torch gloo, ' + label + ' (scaled)':42s} {ms:8.3f} {ms / fused:8.2f}")
    ratio = r["gloo_fused_ms"] / r["gloo_run_sync_default_ms"]
    print(f"gloo fused / MPISync default, taking turns: {ratio:.2f}x (target >= 2x)")


def report_cnn(r: dict) -> None:
    """The CNN rows (:func:`cnn_pairs` and the two 1-rank trainings side by side)."""
    one, two = r["cnn1"]["samples_per_s"], r["cnn2"]["samples_per_s"]
    ratios = sorted(pair["two"] / pair["one"] for pair in r["cnn_pairs"])
    print(
        f"default CNN, the median of {len(ratios)} alternated pairs: 1 rank {one:.0f}/s, "
        f"2 ranks ({r['cnn2'].get('grad_dtype', 'float32')} wire) {two:.0f}/s = "
        f"{two / one:.2f}x (pairs {ratios[0]:.2f}-{ratios[-1]:.2f}x; "
        "target >= 1.8x)"
    )
    apart = sum(job["samples_per_s"] for job in r["cnn_side_by_side"])
    print(
        f"  two 1-rank trainings side by side, no communication: {apart:.0f}/s in all = "
        f"{apart / one:.2f}x one (what the cores allow); 2 ranks / that = {two / apart:.2f}"
    )


#: printed in place of a figure whose step took less than the compute inside it: the load of a
#: shared machine (a sleep that overslept in the compute-only case) at too few repetitions
NOISE = "noise: the step took less than its compute (raise --reps)"


def exposed(step: float, compute: float, comm: float) -> str:
    """The share of ``comm`` (the communication alone) that ``step`` adds to ``compute``, as a
    percentage; :data:`NOISE` where the step took less than its compute, which no sync can do."""
    return f"{(step - compute) / comm:.0%}" if step >= compute else NOISE


def report_streaming(r: dict) -> None:
    """The streaming rows of :func:`streaming`."""
    from distconv.sync.mpi import DEFAULT_BUCKET_BYTES

    # the default buckets over the layout: one of the layout's size, up to DEFAULT_BUCKET_BYTES
    what = f"{min(r['mb'] * MB, DEFAULT_BUCKET_BYTES) / MB:g} MiB bucket"
    what += f"s ({r['mb']:g} MB)" if r["mb"] * MB > DEFAULT_BUCKET_BYTES else ""
    for kind in ("none", "free", "full"):
        on, off = r[f"stream_{kind}_on_ms"], r[f"stream_{kind}_off_ms"]
        line = f"{what}, compute {kind}: stream off {off:.2f} ms, on {on:.2f} ms"
        line += f", on / off {on / off:.3f} (paired {r[f'stream_{kind}_on_x']:.3f})"
        line += f"; one call / off paired {r[f'stream_{kind}_one_x']:.3f}"
        if kind == "free":  # numpy compute shares the cores with the sync: no "alone" to subtract
            compute, comm = r[f"stream_{kind}_compute_ms"], r["stream_none_off_ms"]
            line += f"; exposed off {exposed(off, compute, comm)}, on {exposed(on, compute, comm)}"
        print(line)


def report_updates(r: dict) -> None:
    """The **updates** rows (:func:`updates`): the step with the thread over the same step
    without, each update."""
    for rule in UPDATE_RULES:
        on, off = r[f"update_{rule}_thread_ms"], r[f"update_{rule}_nothread_ms"]
        # bucket_bytes is 1 MiB, a cap: '--mb 0.5' has one bucket of 0.5 MiB, not '1 1 MiB'
        buckets = r[f"update_{rule}_buckets"]
        print(
            f"update {rule} over {buckets} bucket(s) of at most 1 MiB, free cores: step "
            f"without thread {off:.2f} ms, with {on:.2f} ms, with / without paired "
            f"{r[f'update_{rule}_thread_x']:.3f}"
        )


def accuracy(args) -> None:
    """The default CNN on 2 ranks: test accuracy and speed, float32 against 16-bit wires."""
    dtypes = ("float32", "float16", "bfloat16")
    runs = {d: mpiexec(2, "cnn", args, ["--grad-dtype", d]) for d in dtypes}
    for dtype, r in runs.items():
        print(
            f"2 ranks, {dtype} wire, {args.epochs} epochs: test acc {r['test_acc']:.4f}, "
            f"{r['samples_per_s']:.0f} samples/s, {r['wire'] / 1e6:.1f} MB on the wire"
        )
    print(json.dumps(runs))


#: ``--grad-dtype``'s wires (``--accuracy`` hands each to its CNN jobs, float32 too)
GRAD_DTYPES = ("float32", "float16", "bfloat16")
#: the flags whose runs have no CNN rows, so no wire for ``--grad-dtype`` to set (``--accuracy``
#: trains every wire itself)
CNN_DROPPED = ("--no-cnn", "--stream-only", "--update-only", "--accuracy")


#: what MPI launchers set in each rank's environment: MPICH's and Intel MPI's hydra (PMI),
#: Open MPI, PMIx-based launchers (Open MPI 5, Slurm's srun)
LAUNCHED_BY_MPI = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")


def under_mpiexec() -> list[str]:
    """The variables that say an MPI launcher started this process (the driver must not be
    one of its ranks): none where it did not."""
    return [var for var in LAUNCHED_BY_MPI if var in os.environ]


def run_sizes(args) -> dict:
    """What every JSON line records of the sizes it ran: the update rows' figures, as the
    others', depend on ``--compute-ms`` (docs/benchmarks.md's table of them is keyed on it)."""
    return {"mb": args.mb, "grads": args.grads, "compute_ms": args.compute_ms}


def main() -> None:
    from harness import (
        at_least,
        blas_kernels,
        exit_on_sigterm,
        refuse_empty_gradients,
        torch_unimportable,
    )

    from distconv.job import TrainConfig

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # the driver's own plumbing, handed to the jobs it starts: not for the command line
    hidden = argparse.SUPPRESS
    ap.add_argument("--worker", choices=("mpi", "gloo", "cnn", "stream", "update"), help=hidden)
    ap.add_argument("--rank", type=int, default=0, help=hidden)
    ap.add_argument("--sync", default="mpi", help=hidden)
    ap.add_argument(
        "--mb", type=at_least(0, strict=True), default=4.0, help="MB of gradients (%(default)s)"
    )
    ap.add_argument("--grads", type=at_least(1, int), default=100, help="gradients (%(default)s)")
    ap.add_argument(
        "--reps", type=at_least(1, int), default=40, help="timed repetitions (%(default)s)"
    )
    ap.add_argument(
        "--compute-ms",
        type=at_least(0),
        default=20.0,
        help="simulated backward (%(default)s): the sleeps of the free-cores, streaming 'free' "
        "and updates rows; the full-cores and streaming 'full' numpy compute is fixed (two "
        "96x96 products a gradient), whatever this says",
    )
    ap.add_argument(
        "--overlap-bucket",
        type=at_least(1, int),
        default=4 * MB,
        help="bucket bytes, overlap (%(default)s)",
    )
    ap.add_argument(
        "--epochs",
        type=at_least(1, int),
        default=TrainConfig.epochs,
        help="epochs of the CNN runs (default: the default job's own, %(default)s; the first is "
        "the slowest)",
    )
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument(
        "--rotate",
        type=int,
        choices=(0, 1),
        default=1,
        help="1: each repetition of the main table starts one case later (0: always in order; "
        "default %(default)s)",
    )
    ap.add_argument("--no-cnn", action="store_true")
    ap.add_argument(
        "--cnn-pairs", type=int, default=3, help="alternated 1- and 2-rank CNN runs (%(default)s)"
    )
    ap.add_argument(
        "--grad-dtype",
        choices=GRAD_DTYPES,
        default="",
        help="the wire of the CNN rows' 2-rank runs (default float32; the main table times "
        "every wire)",
    )
    ap.add_argument("--stream-only", action="store_true", help="only the streaming cases")
    ap.add_argument("--update-only", action="store_true", help="only the updates cases")
    ap.add_argument(
        "--accuracy",
        action="store_true",
        help="only train the default CNN on 2 ranks, float32, float16, bfloat16 on the wire",
    )
    args = ap.parse_args()
    refuse_empty_gradients(ap, args.mb, args.grads, "--grads")
    if args.worker == "mpi":
        return mpi_worker(args)
    if args.worker == "stream":
        return stream_worker(args)
    if args.worker == "update":
        return update_worker(args)
    if args.worker == "gloo":
        return gloo_worker(args)
    if args.worker == "cnn":
        return cnn_worker(args)
    launched = under_mpiexec()
    if launched:
        ap.error(
            "allreduce.py starts its own mpiexec jobs: run it without mpiexec (under it, each "
            "rank starts a driver of its own, and every figure is taken at double load); "
            f"this process has a launcher's {', '.join(launched)} (not a rank, but a shell "
            "a launcher started or variables left exported? run it under "
            f"env {' '.join(f'-u {var}' for var in launched)} python3 ...)"
        )
    # a flag the run would ignore reads as measured: refuse it before anything runs
    dropped = [f for f in CNN_DROPPED if getattr(args, f.lstrip("-").replace("-", "_"))]
    if args.grad_dtype and dropped:
        ap.error(
            f"--grad-dtype sets the wire of the CNN rows' 2-rank runs, and {dropped[0]} runs "
            "none (the main table times every wire)"
        )
    if args.cnn_pairs < 1 and not dropped:  # cnn_pairs() takes the median of no pair
        ap.error("--cnn-pairs must be at least 1 (--no-cnn skips the CNN rows)")
    if args.grad_dtype:
        from distconv.sync.mpi.wire_dtypes import wire_dtype

        try:  # now, not in the CNN's first 2-rank job, after the main table's minutes
            wire_dtype(args.grad_dtype)
        except (ValueError, ImportError) as exc:
            ap.error(f"--grad-dtype: {exc}")
    exit_on_sigterm()  # a SIGTERM stops the mpiexec jobs too (together()'s finally)
    # the jobs inherit this environment, so they run the kernels this line names
    print(f"# {blas_kernels()}", flush=True)
    if not (args.no_torch or args.accuracy or args.stream_only or args.update_only):
        why = torch_unimportable()  # as the other scripts, it goes on without it
        if why is not None:
            print(f"PyTorch is not importable: no gloo rows (--no-torch; {why})", flush=True)
            args.no_torch = True
    if args.accuracy:
        return accuracy(args)
    if args.stream_only:
        result = {**mpiexec(2, "stream", args), **run_sizes(args)}
        report_streaming(result)
        return print(json.dumps(result))
    if args.update_only:
        result = {**mpiexec(2, "update", args), **run_sizes(args)}
        report_updates(result)
        return print(json.dumps(result))
    result = {**mpiexec(2, "mpi", args), **run_sizes(args)}
    report(result)  # now: a failure in the gloo or CNN jobs after it cannot throw it away
    sys.stdout.flush()
    if not args.no_torch:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        result.update(mpiexec(2, "gloo", args))
        report_gloo(result)
    if not args.no_cnn:
        result.update(cnn_pairs(args))
        result["cnn_side_by_side"] = together([(1, ["--sync", "local"])] * 2, "cnn", args)
        report_cnn(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
