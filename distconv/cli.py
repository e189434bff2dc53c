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
from collections.abc import Sequence

from distconv import __version__
from distconv.backend import BackendError, device_from_env, set_device
from distconv.checkpoint import CheckpointError
from distconv.data import DATASETS, DataError
from distconv.optim import OPTIMIZERS
from distconv.trainer import CHECKPOINT, METRICS, PLOT, TrainConfig, train

#: failures with a cause the user can act on; anything else is a bug and keeps its traceback
USER_ERRORS = (DataError, CheckpointError, BackendError, ValueError, OSError)


def _int_at_least(low: int):
    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    return parse


_positive_int = _int_at_least(1)


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def add_train(subparsers: argparse._SubParsersAction) -> None:
    """``distconv train``: single-process training of LeNet with checkpoints and metrics."""
    d = TrainConfig()
    p = subparsers.add_parser(
        "train",
        help="train a LeNet classifier",
        description="Train LeNet on a data set; write metrics.jsonl, metrics.png and "
        "checkpoint.safetensors to --out.",
    )
    p.add_argument("--data", choices=DATASETS, default=d.data, help="data set (%(default)s)")
    p.add_argument("--data-dir", help="directory of the MNIST IDX files (.gz or raw)")
    p.add_argument(
        "--epochs", type=_positive_int, default=d.epochs, help="epochs in all (%(default)s)"
    )
    p.add_argument(
        "--batch-size", type=_positive_int, default=d.batch_size, help="per step (%(default)s)"
    )
    p.add_argument(
        "--optimizer", choices=sorted(OPTIMIZERS), default=d.optimizer, help="(%(default)s)"
    )
    p.add_argument("--lr", type=_positive_float, help="learning rate (optimizer's default)")
    p.add_argument(
        "--lr-decay",
        type=_positive_float,
        default=d.lr_decay,
        help="epoch e trains at lr * LR_DECAY**e; 1 keeps it constant (%(default)s)",
    )
    p.add_argument(
        "--seed",
        type=_int_at_least(0),
        default=d.seed,
        help="split, init and shuffle seed (%(default)s)",
    )
    p.add_argument(
        "--device",
        choices=("cpu", "gpu"),
        help="where arrays live (default: $DISTCONV_DEVICE, else cpu)",
    )
    p.add_argument("--out", help="output directory (default: runs/<data>-<optimizer>-seed<seed>)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue from <out>/checkpoint.safetensors up to --epochs in all",
    )
    p.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    p.set_defaults(handler=run_train)


def run_train(args: argparse.Namespace) -> int:
    """Train as ``args`` say; print the final test accuracy and where the files went."""
    set_device(args.device or device_from_env())
    out = args.out or os.path.join("runs", f"{args.data}-{args.optimizer}-seed{args.seed}")
    config = TrainConfig(
        data=args.data,
        data_dir=args.data_dir,
        epochs=args.epochs,
        batch_size=args.batch_size,
        optimizer=args.optimizer,
        lr=args.lr,
        lr_decay=args.lr_decay,
        seed=args.seed,
        out=out,
        resume=args.resume,
        progress=False if args.no_progress else None,
    )
    start = time.perf_counter()
    trainer = train(config)
    seconds = time.perf_counter() - start
    if not trainer.history:
        print(f"nothing to do: the checkpoint in {out} is at epoch {trainer.epoch}")
        return 0
    last = trainer.history[-1]
    print(
        f"test accuracy {last['test_acc']:.4f} (loss {last['test_loss']:.4f}) after epoch "
        f"{last['epoch']}, {seconds:.1f}s; wrote {CHECKPOINT}, {METRICS}, {PLOT} in {out}"
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
    """Run the command line; returns the exit status."""
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
        print(f"distconv {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"distconv {args.command}: interrupted", file=sys.stderr)
        return 130


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
