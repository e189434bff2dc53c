"""The command line of ``distconv train``: its flags, what each takes and its default, and how a
train command line written elsewhere (a manifest) reads as the command will read it.

:mod:`distconv.cli` runs the command; :mod:`distconv.train_flag_types` reads each flag's
value; :mod:`distconv.transport_flags` says what the distributed flags mean beyond their parsing.
"""

from __future__ import annotations

import argparse
import functools
import re
from collections.abc import Callable, Sequence
from typing import NoReturn

from distconv.async_hint import ASYNC_HINT, refuse_own_unknowns
from distconv.job import TrainConfig
from distconv.names import DATASET_NAMES, OPTIMIZER_NAMES, TRANSPORT_NAMES
from distconv.number_text import int_at_least
from distconv.train_flag_types import (
    float_in,
    mebibytes,
    not_blank,
    port,
    positive_float,
    positive_int,
    resume_mode,
    server_list,
)
from distconv.verbosity import add_verbosity

#: the end of ``distconv train --help``: what sets a step's threads, which the flags do not,
#: and why the variables that size numpy's threads elsewhere change nothing in a step
THREADS_EPILOG = (
    "Threads: a step runs on DISTCONV_NUM_THREADS kernel threads (default: the cores this "
    "process may use, shared among the job's processes on its host; distconv-launch --threads "
    "sets it for every worker). BLAS is held to one thread inside a step, so OMP_NUM_THREADS "
    "and OPENBLAS_NUM_THREADS change nothing there. OPENBLAS_CORETYPE holds numpy's BLAS to "
    "the kernels it names, which may be slower than this CPU's own: the start log says so. "
    'More in README.md, "Threads and BLAS".'
)


def add_resume_flags(p: argparse.ArgumentParser) -> None:
    """``--resume [auto]`` and ``--overwrite``, which exclude each other (argparse's usage
    error names both): given together, the last one won without a word, so ``--resume
    --overwrite`` deleted the run it was asked to continue. Either sets ``resume`` to what
    :meth:`~distconv.trainer.Trainer.fit` takes: False, True, ``"auto"`` or ``"overwrite"``."""
    resume = p.add_mutually_exclusive_group()
    resume.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=False,
        type=resume_mode,
        help="continue from the newest complete checkpoint in --out; 'auto' starts fresh "
        "when there is none",
    )
    resume.add_argument(
        "--overwrite",
        dest="resume",
        action="store_const",
        const="overwrite",
        help="replace a previous run in --out",
    )


def add_accumulate_flag(p: argparse.ArgumentParser) -> None:
    """``--accumulate N``, forward/backward passes per optimizer step (``distconv train``'s, and
    a training script's: :mod:`distconv.script_flags`)."""
    p.add_argument(
        "--accumulate",
        type=positive_int,
        default=TrainConfig().accumulate,
        help="forward/backward passes per optimizer step (%(default)s)",
    )


def add_dtype_flag(p: argparse.ArgumentParser) -> None:
    """``--dtype float32|float64``, the float type the Trainer trains in (``distconv train``'s,
    and a training script's: :mod:`distconv.script_flags`)."""
    p.add_argument("--dtype", choices=("float32", "float64"), default=TrainConfig().dtype)


def add_train(
    subparsers: argparse._SubParsersAction, async_hint: str = ASYNC_HINT
) -> argparse.ArgumentParser:
    """Add ``distconv train`` (train LeNet alone or as one worker of a job) to ``subparsers``;
    returns its parser, whose refusals of arguments asking for asynchronous SGD end with
    ``async_hint`` (:func:`distconv.async_hint.refuse_own_unknowns`)."""
    d = TrainConfig()
    p = subparsers.add_parser(
        "train",
        help="train a LeNet classifier",
        description="Train LeNet on a data set, alone or as one worker of a distributed job; "
        "write metrics.jsonl, metrics.png and step checkpoints to --out.",
        epilog=THREADS_EPILOG,
    )
    add_verbosity(p)
    refuse_own_unknowns(p, async_hint)
    p.add_argument("--data", choices=DATASET_NAMES, default=d.data, help="data set (%(default)s)")
    p.add_argument(
        "--data-dir", type=not_blank, help="directory of the MNIST IDX files (.gz or raw)"
    )
    p.add_argument(
        "--epochs", type=positive_int, default=d.epochs, help="epochs in all (%(default)s)"
    )
    p.add_argument(
        "--batch-size",
        type=positive_int,
        default=d.batch_size,
        help="examples per forward/backward pass on each worker; a step takes --accumulate "
        "passes (%(default)s)",
    )
    add_accumulate_flag(p)
    p.add_argument(  # in any case, as create_optimizer and script_flags.optimizer take it
        "--optimizer",
        type=str.lower,
        choices=OPTIMIZER_NAMES,
        default=d.optimizer,
        help="(%(default)s)",
    )
    p.add_argument("--lr", type=positive_float, help="learning rate (optimizer's default)")
    p.add_argument(
        "--lr-decay",
        type=float_in(0.0, 1.0, high_closed=True),
        default=d.lr_decay,
        help="epoch e (the first is 1, as the log and metrics.jsonl number them) trains at "
        "lr * LR_DECAY**(e-1); 1 keeps it constant (%(default)s)",
    )
    p.add_argument(
        "--seed",
        type=int_at_least(0),
        default=d.seed,
        help="split, init and shuffle seed (%(default)s)",
    )
    add_dtype_flag(p)
    p.add_argument(
        "--device",
        type=str.lower,  # any case, as DISTCONV_DEVICE and set_device take it
        choices=("cpu", "gpu"),
        help="where arrays live (default: $DISTCONV_DEVICE, else cpu)",
    )
    p.add_argument(
        "--out",
        type=not_blank,
        help="output directory (default: runs/<data>-<optimizer>-seed<seed>)",
    )
    add_resume_flags(p)
    p.add_argument(
        "--init-from",
        type=not_blank,
        metavar="PATH",
        help="start a new run (step 0, fresh optimizer state and schedule) from the weights of "
        "a checkpoint: a run's --out (its newest complete checkpoint), a step folder or a "
        "checkpoint file; a run in --out that --resume or --resume auto continues wins",
    )
    p.add_argument(
        "--checkpoint-every",
        type=int_at_least(0),
        default=d.checkpoint_every,
        help="also checkpoint every N steps (0: at epoch ends and on SIGTERM or Ctrl-C only)",
    )
    p.add_argument(
        "--keep-checkpoints",
        type=positive_int,
        default=d.keep_checkpoints,
        help="complete checkpoints to keep (%(default)s)",
    )
    p.add_argument("--no-progress", action="store_true", help="never draw a progress bar")
    add_distributed_arguments(p)
    return p


def add_distributed_arguments(p: argparse.ArgumentParser) -> None:
    """Who this process is and how it synchronises; flags override the environment."""
    g = p.add_argument_group("distributed")
    # the probes' settings default to None, so that one given without --health-port, which
    # nothing reads, is refused (transport_flags.refuse_probe_flags_without_port); TrainConfig
    # holds their defaults
    d = TrainConfig()
    g.add_argument(
        "--sync",
        choices=TRANSPORT_NAMES,
        help="gradient synchronisation (default: pserver with --pservers, mpi under "
        "mpiexec, else local)",
    )
    g.add_argument("--rank", type=int_at_least(0), help="this worker's rank (overrides env)")
    g.add_argument("--world-size", type=positive_int, help="workers in the job (overrides env)")
    g.add_argument(
        "--job-id",
        help="names the job in --log-format json logs and checkpoint manifests; a parameter "
        "server's shards serve only their job's workers",
    )
    g.add_argument(
        "--pservers", type=server_list, help="parameter-server shards, HOST:PORT,HOST:PORT"
    )
    # one or the other, as distconv pserver takes them: given both, the keys were dropped
    # without a word and the worker talked to its shards unencrypted
    security = g.add_mutually_exclusive_group()
    # not blank: an empty one (an unset variable) read as none given, so DISTCONV_KEYS won
    # over the flag, or the worker asked for the --keys it had been given
    security.add_argument(
        "--keys",
        dest="keys_dir",
        type=not_blank,
        help="directory of the job's CURVE key files",
    )
    security.add_argument(
        "--insecure", action="store_true", help="parameter server without CURVE (experiments)"
    )
    g.add_argument(
        "--timeout",
        type=positive_float,
        help="seconds any wait for a peer may take before the job stops naming it. pserver "
        "(default 60): the shards' own --timeout (0.2 or more), which distconv-launch gives "
        "them; they name the rank that kept them waiting, and a worker waits 1.5 x this for a "
        "shard's reply before it gives up on the shard. mpi (default 600): any blocking MPI "
        "call, including the other ranks' wait while rank 0 writes a checkpoint",
    )
    g.add_argument(
        "--bucket-mb", type=mebibytes, help="allreduce bucket size in MiB (mpi; default 4)"
    )
    g.add_argument(
        "--push-kb",
        type=int_at_least(0),
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
        type=port,
        help="serve /readyz, /healthz and /metrics on this port plus the local rank "
        "(0: any free port)",
    )
    g.add_argument(
        "--health-host",
        type=not_blank,
        help=f"interface of --health-port ({d.health_host}; 0.0.0.0 in a pod, for the kubelet)",
    )
    g.add_argument(
        "--stall-seconds",
        type=positive_float,
        help="/healthz of --health-port turns 503 after this long without a step or a batch "
        f"forwarded; raise it where a checkpoint write may take longer ({d.stall_seconds})",
    )


class FlagError(ValueError):
    """A command line names a flag the command does not take, or abbreviates several."""


def train_parser(async_hint: str = ASYNC_HINT) -> argparse.ArgumentParser:
    """``distconv train``'s parser on its own (without the handler that runs it); see
    :func:`add_train` for ``async_hint``."""
    return add_train(argparse.ArgumentParser(prog="distconv").add_subparsers(), async_hint)


def parse_train_values(
    argv: Sequence[str],
    refuse: Callable[[str], NoReturn],
    on_help: str,
    async_hint: str = ASYNC_HINT,
) -> argparse.Namespace:
    """Parse ``argv`` (after ``train``) with :func:`train_parser`, as every rank or worker would,
    before any starts. ``refuse`` takes argparse's message for a value it refuses (``--epochs
    -1``) and must raise, instead of argparse's print and exit; ``-h``/``--help``, whose help
    and exit 0 would stand for a job, is refused with ``on_help``. A refusal of arguments asking
    for asynchronous SGD ends with ``async_hint`` (``""``: none, the caller says its own)."""
    if any(a in ("-h", "--help") for a in argv):
        refuse(on_help)
    parser = train_parser(async_hint)
    parser.error = refuse  # argparse's hook for every refusal; it would print and exit
    return parser.parse_args(list(argv))


#: what argparse reads as a negative number, a value: ``-1`` and ``-.5``; newer Pythons also
#: ``-1e5``, so any ``-`` then a digit is taken for one, and never refused as a flag
_NUMBER = re.compile(r"-\.?\d")


@functools.cache  # a whole parser's build: spelled_out asks once for each flag it reads
def train_options() -> frozenset[str]:
    """Every option ``distconv train`` takes: the long ones (``--name``), ``-h`` and ``-q``."""
    actions = train_parser()._actions  # argparse lists its options nowhere public
    return frozenset(s for a in actions for s in a.option_strings)


def _matches(name: str) -> list[str]:
    """The options argparse may read ``name`` as: itself, else (a long one) those it starts."""
    options = train_options()
    if name in options:
        return [name]
    if not name.startswith("--") or name == "--":  # only long options are abbreviated
        return []
    return sorted(o for o in options if o.startswith(name))


def full_flag(token: str) -> str:
    """The option of ``distconv train`` that argparse reads ``token`` (``--name`` or
    ``--name=value``, or ``-h``) as: itself, or the one long option that it is the start of
    (argparse's abbreviations).

    Raises:
        FlagError: no option starts so, or several do.
    """
    name = token.split("=", 1)[0]
    matches = _matches(name)
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise FlagError(f"{name} could be any of {', '.join(matches)}")
    raise FlagError(f"distconv train takes no {name}")


def _is_flag(token: str) -> bool:
    """Whether argparse reads ``token`` as a flag rather than a value: it starts with ``-``,
    is more than ``-`` and no negative number, and holds no space unless it names an option
    (``--out "--my dir"`` is a value)."""
    if not token.startswith("-") or token == "-" or _NUMBER.match(token):
        return False
    return " " not in token or bool(_matches(token.split("=", 1)[0]))


def spelled_out(argv: Sequence[str], *, lenient: bool = False) -> list[str]:
    """A ``distconv train`` command line (after ``train``) with every long option written out
    in full as argparse reads it (``--ep 3`` is ``--epochs 3``, ``--ou=x`` is ``--out=x``), so
    that a reader looking for a flag by its name finds it however it was written. Values are
    kept as they are (whether each flag has the values it needs is left to argparse).
    ``lenient`` keeps a flag it cannot spell out as it is, for a caller that only looks.

    Raises:
        FlagError: (not ``lenient``) a flag the command does not take (``-x``), or one that
            abbreviates several.
    """
    out = []
    for token in argv:
        if _is_flag(token):
            name, sep, value = token.partition("=")
            try:
                token = full_flag(name) + sep + value
            except FlagError:
                if not lenient:
                    raise
        out.append(token)
    return out
