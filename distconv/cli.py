"""The ``distconv`` command: ``distconv train ...``; more subcommands plug in beside it.

Each subcommand is an ``add_<name>(subparsers)`` function that declares its arguments and sets
``handler``. Errors the user can fix (bad data, a corrupt checkpoint, no GPU, a bad option) end
the process with status 1 and one line naming the cause; ``DISTCONV_DEBUG=1`` shows the
traceback instead.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import traceback
from collections.abc import Sequence

from distconv import __version__
from distconv.backend import BackendError, device_from_env, set_device
from distconv.checkpoint import CheckpointError
from distconv.data import DATASETS, DataError
from distconv.distributed import choose_transport
from distconv.job import TrainConfig, train
from distconv.layers.base import LayerError
from distconv.logs import configure_logging
from distconv.messages import exception_line
from distconv.metrics import MetricsError
from distconv.network import NetworkError
from distconv.optim import OPTIMIZERS
from distconv.runtime import RuntimeConfigError, detect_runtime, runtime_flags
from distconv.sync import TRANSPORTS, SyncError
from distconv.sync.mpi import leaving
from distconv.sync.ps.cli import PserverStartError
from distconv.trainer import METRICS, PLOT, Preempted, TrainingError
from distconv.transport_flags import (
    mpi_train_rank,
    refuse_unused_flags,
    sync_options,
)

#: failures with a cause the user can act on; anything else is a bug and keeps its traceback
USER_ERRORS = (
    DataError,
    CheckpointError,
    BackendError,
    NetworkError,
    RuntimeConfigError,
    SyncError,
    PserverStartError,
    TrainingError,
    MetricsError,
    LayerError,
    OSError,
)


def _number(text: str, kind: type) -> float | int:
    """``kind(text)``, or the one-line usage error argparse prints for a bad value."""
    try:
        return kind(text)
    except ValueError:
        name = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"must be {name}, got {text!r}") from None


def _int_at_least(low: int):
    def parse(text: str) -> int:
        value = _number(text, int)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1)


def _float_in(low: float, high: float, *, high_closed: bool = False):
    """A parser for a finite float in ``(low, high)`` (or ``(low, high]``)."""

    def parse(text: str) -> float:
        value = _number(text, float)
        if not (value > low and (value <= high if high_closed else value < high)):
            closing = "]" if high_closed else ")"
            raise argparse.ArgumentTypeError(f"must lie in ({low}, {high}{closing}, got {text}")
        return value

    return parse


_positive_float = _float_in(0.0, float("inf"))


def _resume_mode(text: str) -> str:
    if text != "auto":
        raise argparse.ArgumentTypeError(f"the only value --resume takes is 'auto', got {text!r}")
    return text


def _directory(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def add_train(subparsers: argparse._SubParsersAction) -> None:
    """``distconv train``: train LeNet alone or as one worker of a job."""
    d = TrainConfig()
    p = subparsers.add_parser(
        "train",
        help="train a LeNet classifier",
        description="Train LeNet on a data set, alone or as one worker of a distributed job; "
        "write metrics.jsonl, metrics.png and step checkpoints to --out.",
    )
    p.add_argument("--data", choices=DATASETS, default=d.data, help="data set (%(default)s)")
    p.add_argument("--data-dir", help="directory of the MNIST IDX files (.gz or raw)")
    p.add_argument(
        "--epochs", type=_positive_int, default=d.epochs, help="epochs in all (%(default)s)"
    )
    p.add_argument(
        "--batch-size",
        type=_positive_int,
        default=d.batch_size,
        help="examples per step on each worker (%(default)s)",
    )
    p.add_argument(
        "--accumulate",
        type=_positive_int,
        default=d.accumulate,
        help="forward/backward passes per optimizer step (%(default)s)",
    )
    p.add_argument(
        "--optimizer", choices=sorted(OPTIMIZERS), default=d.optimizer, help="(%(default)s)"
    )
    p.add_argument("--lr", type=_positive_float, help="learning rate (optimizer's default)")
    p.add_argument(
        "--lr-decay",
        type=_float_in(0.0, 1.0, high_closed=True),
        default=d.lr_decay,
        help="epoch e trains at lr * LR_DECAY**e; 1 keeps it constant (%(default)s)",
    )
    p.add_argument(
        "--seed",
        type=_int_at_least(0),
        default=d.seed,
        help="split, init and shuffle seed (%(default)s)",
    )
    p.add_argument("--dtype", choices=("float32", "float64"), default=d.dtype)
    p.add_argument(
        "--device",
        choices=("cpu", "gpu"),
        help="where arrays live (default: $DISTCONV_DEVICE, else cpu)",
    )
    p.add_argument(
        "--out",
        type=_directory,
        help="output directory (default: runs/<data>-<optimizer>-seed<seed>)",
    )
    resume = p.add_mutually_exclusive_group()
    resume.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=False,
        type=_resume_mode,
        help="continue from the newest complete checkpoint in --out; 'auto' starts fresh "
        "when there is none",
    )
    resume.add_argument("--overwrite", action="store_true", help="replace a previous run in --out")
    p.add_argument(
        "--checkpoint-every",
        type=_int_at_least(0),
        default=d.checkpoint_every,
        help="also checkpoint every N steps (0: at epoch ends and on SIGTERM only)",
    )
    p.add_argument(
        "--keep-checkpoints",
        type=_positive_int,
        default=d.keep_checkpoints,
        help="complete checkpoints to keep (%(default)s)",
    )
    p.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    add_distributed_arguments(p)
    p.set_defaults(handler=run_train)


def add_distributed_arguments(p: argparse.ArgumentParser) -> None:
    """Who this process is and how it synchronises; flags override the environment."""
    g = p.add_argument_group("distributed")
    g.add_argument(
        "--sync",
        choices=sorted(TRANSPORTS),
        help="gradient synchronisation (default: pserver with --pservers, mpi under "
        "mpiexec, else local)",
    )
    g.add_argument("--rank", type=_int_at_least(0), help="this worker's rank (overrides env)")
    g.add_argument("--world-size", type=_positive_int, help="workers in the job (overrides env)")
    g.add_argument("--job-id", help="names the job in logs and metrics")
    g.add_argument("--pservers", help="parameter-server shards, HOST:PORT,HOST:PORT")
    g.add_argument("--keys", dest="keys_dir", help="directory of the job's CURVE key files")
    g.add_argument(
        "--insecure", action="store_true", help="parameter server without CURVE (experiments)"
    )
    g.add_argument(
        "--timeout",
        type=_positive_float,
        help="seconds any wait for a peer may take before the job stops naming it (pserver: "
        "60; mpi: 600, any blocking MPI call, including the other ranks' wait while rank 0 "
        "writes a checkpoint)",
    )
    g.add_argument(
        "--bucket-mb", type=_positive_float, help="allreduce bucket size in MiB (mpi; default 4)"
    )
    g.add_argument(
        "--push-kb",
        type=_int_at_least(0),
        help="queued gradients go to their shard once this many KiB wait (pserver; default "
        "1024; 0 sends each gradient during backward as soon as the link is free, and what "
        "is left at the end of the step in messages of the default size)",
    )
    g.add_argument(
        "--grad-dtype",
        choices=("float16", "bfloat16"),
        help="compress gradients on the wire to half the bytes (mpi); on CPUs prefer bfloat16: "
        "numpy casts float16 element by element, several times slower",
    )
    g.add_argument("--log-format", choices=("text", "json"), default="text")
    g.add_argument(
        "--health-port",
        type=_int_at_least(0),
        help="serve /readyz, /healthz and /metrics on this port plus the local rank "
        "(0: any free port)",
    )
    g.add_argument(
        "--health-host",
        default="127.0.0.1",
        help="interface of --health-port (%(default)s; 0.0.0.0 in a pod, for the kubelet)",
    )


def run_train(args: argparse.Namespace) -> int:
    """Train as ``args`` say; print the final test accuracy and where the files went."""
    runtime = detect_runtime(runtime_flags(args))
    refuse_unused_flags(args, args.sync or choose_transport(runtime))
    configure_logging(runtime, logging.WARNING if args.quiet else logging.INFO, args.log_format)
    set_device(args.device or device_from_env(), local_rank=runtime.local_rank)
    out = args.out or os.path.join("runs", f"{args.data}-{args.optimizer}-seed{args.seed}")
    config = TrainConfig(
        data=args.data,
        data_dir=args.data_dir,
        epochs=args.epochs,
        batch_size=args.batch_size,
        accumulate=args.accumulate,
        optimizer=args.optimizer,
        lr=args.lr,
        lr_decay=args.lr_decay,
        seed=args.seed,
        dtype=args.dtype,
        out=out,
        resume="overwrite" if args.overwrite else args.resume,
        checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints,
        progress=False if args.no_progress else None,
        health_port=args.health_port,
        health_host=args.health_host,
        sync=args.sync,
        sync_options=sync_options(args),
    )
    leaving.BRIEF_ERRORS = USER_ERRORS  # a rank aborting an MPI job on one: no traceback
    start = time.perf_counter()
    trainer = train(config, runtime)
    seconds = time.perf_counter() - start
    if not runtime.is_chief:
        return 0
    if not trainer.history:
        print(f"nothing left to do: the run in {out} has finished epoch {trainer.pos.epoch}")
        return 0
    last = trainer.history[-1]
    print(
        f"test accuracy {last['test_acc']:.4f} (loss {last['test_loss']:.4f}) after epoch "
        f"{last['epoch']}, {seconds:.1f}s; wrote checkpoints, {METRICS} and {PLOT} in {out}"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="distconv", description="A hackable data-parallel training framework."
    )
    parser.add_argument("--version", action="version", version=f"distconv {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="log warnings only")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_train(subparsers)
    from distconv.sync.ps.cli import add_keys, add_pserver  # declares flags only; no zmq import

    add_pserver(subparsers)
    add_keys(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    A rank of an MPI job that fails before MPI is initialised (a bad option, its data, its
    environment) aborts the job: the other ranks would wait for it in ``MPI_Init`` for ever.
    """
    status = 1
    try:
        status = _main(argv)
    except SystemExit as exc:  # argparse's errors, --help
        status = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        raise
    finally:
        if status and mpi_train_rank(sys.argv[1:] if argv is None else argv):
            if sys.exc_info()[1] is not None and not isinstance(sys.exc_info()[1], SystemExit):
                traceback.print_exc()  # before the abort ends this process
            leaving.abort_uninitialised(status)
    return status


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(message)s",
        datefmt="%H:%M:%S",
    )
    try:
        return args.handler(args)
    except USER_ERRORS as exc:
        if os.environ.get("DISTCONV_DEBUG"):
            raise
        sys.stderr.write(f"distconv {args.command}: error: {exception_line(exc)}\n")
        return 1
    except Preempted as exc:
        _say(f"distconv {args.command}: {exc}")
        return exc.exit_status
    except KeyboardInterrupt:
        _say(f"distconv {args.command}: interrupted")
        return 130


def _say(line: str) -> None:
    """Print ``line`` on stderr where it can go: after Ctrl-C on ``distconv train | tee``, the
    pipe's reader got the same Ctrl-C, and its EPIPE must not turn a stop into a crash. One
    write: stderr writes through, and ``print`` writes the newline apart, so the lines of two
    ranks under ``mpiexec`` would run into one another."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except OSError:
        pass
