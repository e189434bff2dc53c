"""The ``distconv`` command: ``distconv train ...``; more subcommands plug in beside it.

Each subcommand is an ``add_<name>(subparsers)`` function that declares its arguments
(``train``'s are in :mod:`distconv.train_args`) and sets ``handler`` (:func:`build_parser` sets
``train``'s). Errors the user can fix (bad data, a corrupt checkpoint, no GPU, a bad option) end
the process with status 1 and one line naming the cause; ``DISTCONV_DEBUG=1`` shows the
traceback instead. A rank that stopped because another rank failed (a
:class:`~distconv.sync.peers.PeerFailed`) exits :data:`~distconv.sync.peers.PEER_FAILED_STATUS`
(75) instead of 1, so a launcher can report the rank that failed first.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
import time
from collections.abc import Sequence
from contextlib import nullcontext

from distconv.logs import as_log_line, interrupted_line
from distconv.messages import quote_in_errors, quoted_in, say
from distconv.number_text import int_at_least
from distconv.runtime import Runtime, RuntimeConfigError
from distconv.stdout_drop import drop_stdout
from distconv.train_args import add_train
from distconv.train_flag_types import not_blank
from distconv.user_errors import end_on_user_error, user_errors
from distconv.verbosity import (
    add_verbosity,
    debug_own_lines,
    from_command,
    log_level,
    refuse_both,
)


def refuse_local_sync_of_many(sync: str | None, runtime: Runtime) -> None:
    """Refuse local sync, asked for (``--sync local``) or picked (no servers, no MPI
    launcher), on a rank of several, in ``distconv train``'s words: the transport's own refusal
    speaks to a script (``as a script's init() picks itself``), and sent a command-line user to
    an ``init()`` there is none of.

    Raises:
        RuntimeConfigError: naming the rank, why local sync, and how to start the job instead.
    """
    from distconv.distributed import choose_transport

    if runtime.world_size == 1 or (sync or choose_transport(runtime)) != "local":
        return
    why = "--sync local" if sync else "picked: no --pservers, no MPI launcher"
    raise RuntimeConfigError(
        f"this process is rank {runtime.rank} of {runtime.world_size} ({runtime.source}), but "
        f"local sync trains alone ({why}); use --sync pserver or mpi, or leave --sync out and "
        "distconv train picks it itself, started with parameter servers (distconv-launch local "
        "--servers 1 or more, or --pservers HOST:PORT,...) or under MPI (distconv-launch mpi, "
        "mpiexec)"
    )


def run_train(args: argparse.Namespace) -> int:
    """Train as ``args`` say; print the final test accuracy and where the files went."""
    # imported here: the other commands and every --help need none of numpy, the trainer,
    # the transports and prometheus_client, which take most of a start
    from distconv.backend import device_from_env, set_device
    from distconv.default_out import default_out, resume_into_default
    from distconv.distributed import choose_transport
    from distconv.job import TrainConfig, train
    from distconv.logs import configure_logging
    from distconv.runtime import detect_runtime, runtime_flags
    from distconv.script_flags import nothing_left
    from distconv.stop_kept import kept_said_at_stop, train_resume_words
    from distconv.sync.mpi import leaving
    from distconv.transport_flags import (
        refuse_probe_flags_without_port,
        refuse_unused_flags,
        sync_options,
    )

    runtime = detect_runtime(runtime_flags(args))
    refuse_unused_flags(args, args.sync or choose_transport(runtime))
    refuse_local_sync_of_many(args.sync, runtime)
    refuse_probe_flags_without_port(args)
    configure_logging(runtime, log_level(args), args.log_format)
    set_device(args.device or device_from_env(), local_rank=runtime.local_rank)
    out = args.out or default_out(args.data, args.optimizer, args.seed)
    made_of = f"--data {args.data} --optimizer {args.optimizer} --seed {args.seed}"
    defaulted = args.out is None and runtime.is_chief  # the only rank with a run directory
    told = resume_into_default(out, args.resume, made_of) if defaulted else nullcontext()
    probes = {"health_host": args.health_host, "stall_seconds": args.stall_seconds}
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
        resume=args.resume,  # False, True, "auto" or "overwrite" (--overwrite)
        init_from=args.init_from,
        checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints,
        progress=False if args.no_progress else None,
        health_port=args.health_port,
        **{k: v for k, v in probes.items() if v is not None},  # else TrainConfig's defaults
        sync=args.sync,
        sync_options=sync_options(args),
    )
    leaving.BRIEF_ERRORS = user_errors()  # a rank aborting an MPI job on one: no traceback
    start = time.perf_counter()
    given = getattr(args, "argv", None)  # main([...])'s words, not the process's
    resumes = functools.partial(train_resume_words, out, args.out is not None, given)
    stop_said = kept_said_at_stop("distconv train", out, resumes)
    with told, stop_said:
        trainer = train(config, runtime)
    seconds = time.perf_counter() - start
    if not runtime.is_chief:
        return 0
    if not trainer.history:
        line = nothing_left(out, trainer.pos.epoch, trainer.pos.step_in_epoch)
        # --out $'a\nb' shown as the error lines show it: a reader by lines got half a path
        _print(as_log_line(quoted_in(line, [out]), epoch=trainer.pos.epoch, out=out))
        return 0
    last = trainer.history[-1]
    line = (
        f"test accuracy {last['test_acc']:.4f} (loss {last['test_loss']:.4f}) after epoch "
        f"{last['epoch']}, {seconds:.1f}s; wrote {_written(out)} in {out}"
    )
    result = {key: last[key] for key in ("epoch", "test_acc", "test_loss")}
    _print(as_log_line(quoted_in(line, [out]), seconds=round(seconds, 3), out=out, **result))
    return 0


def _written(out: str) -> str:
    """What a run that trained wrote in ``out``: the plot only where it is newer than the last
    line of the metrics log. A plot that could not be written (a full disk) is a warning that
    leaves the one before it, and the line after the warning said it was written."""
    from distconv.run_dir import METRICS, PLOT

    try:
        drawn = (
            os.stat(os.path.join(out, PLOT)).st_mtime_ns
            >= os.stat(os.path.join(out, METRICS)).st_mtime_ns
        )
    except OSError:  # none at all
        drawn = False
    return f"checkpoints, {METRICS} and {PLOT}" if drawn else f"checkpoints and {METRICS}"


def _print(line: str) -> None:
    """Print ``line`` on stdout, whose reader may be gone (``distconv train | head -c 0``): a
    closed pipe must not turn a finished run into a failure. stdout then goes to /dev/null, so
    the flush at exit does not fail either (Python's "Note on SIGPIPE")."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        drop_stdout()


class BuildVersion(argparse.Action):
    """``--version``: ``distconv 0.1.0+<digest>`` (:func:`~distconv.build_identity.build_id`),
    the source digest read only when asked, not at every command's start."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        from distconv.build_identity import build_id

        sys.stdout.write(f"distconv {build_id()}\n")  # stdout, as argparse's own version action
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="distconv", description="A hackable data-parallel training framework."
    )
    parser.add_argument("--version", action=BuildVersion, help="show distconv's build and exit")
    add_verbosity(parser, quiet_help="log warnings only (or after the COMMAND)")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_train(subparsers).set_defaults(handler=run_train)
    from distconv.sync.ps.cli import add_keys, add_pserver  # declares flags only; no zmq import

    add_pserver(subparsers)
    add_keys(subparsers)
    add_check_manifests(subparsers)
    add_evaluate(subparsers)
    return parser


def add_evaluate(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``distconv evaluate`` (:mod:`distconv.evaluate_cmd`, imported when it runs);
    returns its parser."""
    p = subparsers.add_parser(
        "evaluate",
        help="print a trained run's test loss and accuracy, from its checkpoint",
        description="Rebuild a run's model and data from its checkpoint, load its weights and "
        "print the test loss and accuracy of the test split the run evaluated (its seed's), "
        "as its metrics.jsonl has them. Reads the run's folder only: a run still training may "
        "be evaluated.",
    )
    p.add_argument(
        "--from",
        dest="source",
        required=True,
        type=not_blank,
        metavar="PATH",
        help="what --init-from takes: a run's --out (its newest checkpoint), its checkpoints "
        "folder, a checkpoints/step-N folder or step-N.json manifest, or a checkpoint file",
    )
    p.add_argument(
        "--data",
        help="evaluate on this data set's test split (split by the run's seed) instead of the "
        "run's own data set",
    )
    p.add_argument("--data-dir", help="the IDX files' directory, for --data mnist")
    p.add_argument(
        "--batch-size",
        type=int_at_least(1),
        default=256,
        help="examples a batch (default 256, as training evaluates; the numbers do not depend "
        "on it beyond float rounding)",
    )
    p.add_argument(
        "--device",
        type=str.lower,  # any case, as DISTCONV_DEVICE and set_device take it
        choices=("cpu", "gpu"),
        help="default: $DISTCONV_DEVICE, else cpu",
    )
    p.add_argument("--log-format", choices=("text", "json"), default="text")
    add_verbosity(p)
    p.set_defaults(handler=_evaluate)
    return p


def _evaluate(args: argparse.Namespace) -> int:
    """Run ``distconv evaluate``, its modules imported only now; print its one line."""
    from distconv.evaluate_cmd import run_evaluate

    line, fields = run_evaluate(args)
    _print(as_log_line(quoted_in(line, [args.source]), **fields))
    return 0


def add_check_manifests(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Declare ``distconv check-manifests`` (:mod:`distconv.deploy.check_command`); returns its
    parser. Declared here, not there: importing anything under ``distconv.deploy`` loads every
    check and the renderer (40 ms, a quarter of ``distconv train``'s start), and PyYAML with the
    command's module; they load when the command runs."""
    p = subparsers.add_parser(
        "check-manifests",
        help="check one job's Kubernetes manifests for what would fail only in the cluster",
        description="Check one job's Kubernetes manifests (YAML or JSON) for what no schema "
        "catches: one line per problem on stdout and exit 1 where there is any, 'no problems' "
        "and exit 0 where there is none; exit 2 where a path cannot be read or the result "
        "cannot be written.",
    )
    p.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="a YAML or JSON file, a folder (its *.yaml, *.yml and *.json files) or - for "
        "stdin; all of them together are one job's manifests",
    )
    p.add_argument("-r", "--recursive", action="store_true", help="read subfolders too")
    # SUPPRESS: `distconv -q check-manifests` sets it as well, and a default must not undo that
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print nothing where there is no problem",
    )
    p.set_defaults(handler=_check_manifests)
    return p


def _check_manifests(args: argparse.Namespace) -> int:
    """Run ``distconv check-manifests``, its modules imported only now."""
    from distconv.deploy.check_command import run_check_manifests

    return run_check_manifests(args)


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
        if status:
            _abort_mpi_job(status, sys.argv[1:] if argv is None else argv)
        # a stop's hold lasts to the process's exit where main is the command itself (argv
        # None: a SIGTERM as the interpreter shuts down killed it by the signal, -15, not the
        # stop's 143); a caller in-process handing its own argv gets its handler back
        if argv is not None and "distconv.stop_request" in sys.modules:
            sys.modules["distconv.stop_request"].release_sigterm_hold()
    return status


def _abort_mpi_job(status: int, argv: Sequence[str]) -> None:
    """Abort the MPI job where this failed process is a rank of one that trains; its modules
    are imported only on a failure."""
    from distconv.transport_flags import mpi_train_rank

    # 'distconv -v train', 'distconv --verbose=1 train': the check reads past -q alone, and a
    # rank failing after another option exited without the abort, its peers in MPI_Init
    if mpi_train_rank(from_command(argv)):
        from distconv.notes import print_exception
        from distconv.sync.mpi import leaving

        error = sys.exc_info()[1]
        if error is not None and not isinstance(error, SystemExit):
            print_exception(error)  # before the abort ends this process (its notes: 3.10's too)
        leaving.abort_uninitialised(status)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = None if argv is None else list(argv)  # a stop's way on says them (not sys.argv)
    refuse_both(parser, args)
    # a path given with a line break is shown quoted in the error line, not squeezed
    quote_in_errors(v for v in vars(args).values() if isinstance(v, (str, os.PathLike)))
    logging.basicConfig(
        level=log_level(args),
        format="%(asctime)s %(message)s",
        datefmt="%H:%M:%S",
    )
    debug_own_lines(args)
    fmt = getattr(args, "log_format", None)  # an error before the log is set up heeds it too
    try:
        return args.handler(args)
    except KeyboardInterrupt as interrupt:  # its notes name what it cut short (fail_setup's)
        say(interrupted_line(f"distconv {args.command}", interrupt, fmt))
        return 130
    except Exception as exc:
        if not isinstance(exc, user_errors(loaded_only=True)):
            preempted = sys.modules.get("distconv.stop_request")
            if preempted is None or not isinstance(exc, preempted.Preempted):
                raise
            say(as_log_line(f"distconv {args.command}: {exc}", logging.WARNING, fmt))
            return exc.exit_status
        # 75 for another rank's failure: --rank names this one too, not RANK alone
        status = end_on_user_error(
            f"distconv {args.command}", exc, fmt, getattr(args, "rank", None)
        )
        if status is None:  # the traceback under DISTCONV_DEBUG=1
            raise
        return status
