"""The ``distconv-launch`` options: those every supervised job has, and each command's own.

:func:`launcher.cli.build_parser` puts them under their commands; everything after ``--`` is
the workers' program and is split off first (:func:`split_argv`).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from distconv.deploy.gpus_per_rank import too_many_gpus
from distconv.files import folder
from distconv.number_text import decimal, int_at_least
from distconv.sync.ps.limits import (  # the shards' bound and refusal, without their numpy
    DEFAULT_MAX_STALENESS,
    MAX_SETTING,
    staleness_in_sync,
)

from .interrupt import release
from .mpi import SHARED_BINS
from .owned import owned_by
from .shown import shown
from .supervisor import SETTLE_SECONDS

#: the command's name, as its usage says it
PROG = "distconv-launch"
#: an argparse type: an integer of at least ``low``, as every distconv command line reads one
at_least = int_at_least


def launch_folder(text: str) -> str:
    """An argparse type: :func:`distconv.files.folder`, the paths its refusal names quoted
    (:func:`.shown.shown`) as the launcher's other lines quote them."""
    return folder(text, shown)


def gpus_per_rank(text: str) -> int:
    """An argparse type: ``--gpus``, 0 or 1 (:func:`distconv.deploy.gpus_per_rank.too_many_gpus`
    says why not more, and how to use more per pod): a usage error, as ``--gpus -1`` is, not
    a failure of the render."""
    gpus = at_least(0)(text)
    if (too_many := too_many_gpus(gpus)) is not None:
        raise argparse.ArgumentTypeError(too_many)
    return gpus


def seconds(text: str) -> float:
    """An argparse type: a finite, non-negative number of seconds."""
    value = decimal(text)  # finite: a grace of inf (or nan) would wait forever
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be finite and >= 0, got {value}")
    return value


def staleness(text: str) -> int:
    """An argparse type: an async shard's ``--max-staleness``, as ``distconv pserver`` takes it
    (``distconv.sync.ps.config.ShardConfig.check``): 0 up to 2**63 - 1, which its ``hello``
    tells the workers; past those every shard refused it at its start, after the keys."""
    value = at_least(0)(text)
    if value > MAX_SETTING:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SETTING} (2**63 - 1), got {value}")
    return value


def given(text: str) -> str:
    """An argparse type: a value that names something (a hostfile, a host list, a program),
    which a blank one (an unset variable: ``--hostfile "$NODES"``) names nothing of; it was
    taken for the flag left out, so a job meant for other hosts ran all its ranks on this one
    (``--run-dir`` refuses it too: :func:`distconv.files.folder`)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def job_name(text: str) -> str:
    """An argparse type: a job id, which names ``runs/<job-id>`` and goes on the shards' command
    line: letters, digits, ``-``, ``_`` and ``.``, not blank (an unset variable, which
    gave the job a new random id, so a launch again to continue started afresh elsewhere), not
    ``.`` or ``..`` (no folder of its own) and not starting with ``-`` (every shard read it as
    a flag and stopped: ``argument --job-id: expected one argument``)."""
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    if not all(c.isalnum() or c in "-_." for c in text):
        raise argparse.ArgumentTypeError(f"must be letters, digits, '-', '_' or '.': {shown(text)}")
    if text in (".", ".."):
        raise argparse.ArgumentTypeError(f"{shown(text)} names no folder of its own (runs/{text})")
    if text.startswith("-"):
        raise argparse.ArgumentTypeError(f"must not start with '-': {shown(text)}")
    return text


def add_staleness_option(p: argparse.ArgumentParser) -> None:
    """``--max-staleness N`` of ``local`` and ``k8s``, passed on to their async shards."""
    p.add_argument(
        "--max-staleness",
        type=staleness,
        metavar="N",
        help="--mode async: a shard drops a push more than N updates behind its block (default: "
        f"the shards', {DEFAULT_MAX_STALENESS})",
    )


#: what a supervised job's run directory holds besides its logs (and a local job's keys)
_REPORTS = "failure.json and restarts.jsonl"
#: what every launch adds there, supervised or not (launch_record)
_LAUNCHES = "launch.json lists each launch's command, build and environment"
#: where distconv train writes there, unless given its own --out (commands.with_out)
_TRAIN_RUN = "distconv train's run in train/ (without its own --out)"


def add_job_options(p: argparse.ArgumentParser, holds: str) -> None:
    """Options every supervised job has: restarts, grace, run directory (``holds``: what the
    command puts there), job id, threads."""
    p.add_argument(
        "--max-restarts", type=at_least(0), default=0, help="restarts after a failure (0)"
    )
    p.add_argument(
        "--grace",
        type=seconds,
        default=30.0,
        help=(
            "seconds from SIGTERM to SIGKILL (30); the workers stop at a step they agree on, "
            "at most 8 steps on: give that time and a checkpoint's write"
        ),
    )
    p.add_argument(
        "--run-dir",
        type=launch_folder,
        help=f"{_TRAIN_RUN}, {holds} (default: runs/<job-id>); {_LAUNCHES}",
    )
    p.add_argument(
        "--job-id", type=job_name, help="names the job (default: launch-<time>-<random>)"
    )
    p.add_argument(
        "--threads",
        type=at_least(1),
        help="kernel and BLAS threads per worker (default: this process's usable cores / its "
        "children; under mpi, each rank's kernel threads: its host's cores / the ranks there)",
    )


def add_local_options(p: argparse.ArgumentParser) -> None:
    """``local``: workers and parameter-server shards on this host."""
    p.add_argument("--workers", type=at_least(1), required=True, help="worker processes")
    p.add_argument(
        "--servers", type=at_least(0), default=1, help="parameter-server shards; 0 for none (1)"
    )
    p.add_argument("--mode", choices=("sync", "async"), default="sync", help="(sync)")
    add_staleness_option(p)
    p.add_argument("--insecure", action="store_true", help="no CURVE keys (passes --insecure on)")
    p.add_argument(
        "--settle",
        type=seconds,
        default=SETTLE_SECONDS,
        help="after a worker exits 75 (it stopped because another rank failed), seconds to "
        "wait for that rank's failure, to report it as the cause; after a checkpointed stop "
        f"(143, 130), for the other ranks' own exits ({SETTLE_SECONDS:g})",
    )
    # the keys only where cli.local_plan makes them: shards, and no --insecure
    add_job_options(p, "logs, CURVE keys (with shards, unless --insecure), " + _REPORTS)


def add_mpi_options(p: argparse.ArgumentParser) -> None:
    """``mpi``: ranks under mpiexec, where to put them and how to call it."""
    p.add_argument("-np", "-n", dest="np", type=at_least(1), required=True, help="ranks")
    hosts = p.add_mutually_exclusive_group()
    hosts.add_argument(
        "--hostfile", type=given, help="host:slots (MPICH) or 'host slots=N' (OpenMPI) lines"
    )
    hosts.add_argument("-H", "--hosts", dest="hosts", type=given, help="h1:2,h2:2")
    p.add_argument("--dry-run", action="store_true", help="print the command, run nothing")
    p.add_argument("--oversubscribe", action="store_true", help="more ranks than slots")
    p.add_argument("--allow-run-as-root", action="store_true", help="(OpenMPI)")
    p.add_argument(
        "--mpiexec",
        type=given,
        # find_mpiexec's order: beside Python first, but beside a system's own Python
        help="the mpiexec to run (default: mpiexec or mpirun beside Python, else on PATH; "
        f"beside a Python in {', '.join(SHARED_BINS[:-1])} or {SHARED_BINS[-1]}, PATH's first)",
    )
    p.add_argument("--mpi-flavor", choices=("mpich", "openmpi"), help="skip `mpiexec --version`")
    add_job_options(p, "logs, " + _REPORTS)  # no keys: the ranks talk through MPI


def add_k8s_options(p: argparse.ArgumentParser) -> None:
    """``k8s``: the shape and image of the job whose manifests are rendered."""
    p.add_argument("--workers", type=at_least(1), required=True, help="training ranks")
    p.add_argument(
        "--servers", type=at_least(0), help="parameter-server shards; 0 renders an MPIJob (1)"
    )
    p.add_argument(
        "--image",
        required=True,
        help="container image with distconv: a tag of its own per build, or a digest (pods pull "
        "IfNotPresent, so a node keeps a cached image of the same tag)",
    )
    p.add_argument(
        "--gpus",
        type=gpus_per_rank,
        default=0,
        help="GPUs per training rank, 0 or 1 (a rank trains on one device); an MPIJob worker pod "
        "gets this times --slots-per-worker (0)",
    )
    p.add_argument(
        "--mode", choices=("sync", "async"), default="sync", help="parameter-server SGD (sync)"
    )
    add_staleness_option(p)
    p.add_argument("--job-name", default="distconv", help="(distconv)")
    p.add_argument("--slots-per-worker", type=at_least(1), default=1, help="MPIJob slots (1)")
    p.add_argument(
        "--mpi", action="store_true", help="an MPIJob, as --servers 0 (which it implies)"
    )
    p.add_argument(
        "--ipv6",
        action="store_true",
        help="shards and probes listen on :: (IPv6 and IPv4), for a cluster whose pods have "
        "IPv6 addresses; parameter-server jobs only",
    )
    p.add_argument(
        "--out", type=launch_folder, help="write one file per object here (default: YAML to stdout)"
    )


def set_by_operator(parser: argparse.ArgumentParser, args: argparse.Namespace, dest: str) -> bool:
    """Whether ``dest`` holds other than its default: argparse stores the default where the
    flag is absent, so a flag given its default value (``--mode sync``) counts as not typed."""
    return getattr(args, dest) != parser.get_default(dest)


def ignored_flag(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str | None:
    """Why a flag the operator typed would change nothing in this job (``--mode async`` with
    no shards); None when every flag counts. ``parser`` is the command's own."""
    if args.command == "local" and args.servers == 0:
        for dest, flag in (
            ("mode", f"--mode {args.mode}"),
            ("max_staleness", f"--max-staleness {args.max_staleness}"),
            ("insecure", "--insecure"),
        ):
            if set_by_operator(parser, args, dest):
                return f"{flag} is for the parameter-server shards, and --servers 0 starts none"
    if args.command == "k8s":
        mpijob = "--mpi" if args.mpi else "--servers 0" if args.servers == 0 else None
        for dest, flag in (
            ("mode", f"--mode {args.mode}"),
            ("max_staleness", f"--max-staleness {args.max_staleness}"),
        ):
            if mpijob and set_by_operator(parser, args, dest):
                return (
                    f"{flag} is for parameter-server shards, and {mpijob} renders an MPIJob, "
                    "which has none"
                )
    if args.command != "mpi" and args.mode != "async" and args.max_staleness is not None:
        return staleness_in_sync(args.max_staleness)  # as distconv pserver refuses it
    if args.command == "mpi" and args.dry_run:
        # the printed command is mpiexec alone: nothing supervises it, restarts or stops it
        for dest, flag in (("max_restarts", "--max-restarts"), ("grace", "--grace")):
            if set_by_operator(parser, args, dest):
                return (
                    f"{flag} {getattr(args, dest):g} is for a job the launcher runs, and "
                    "--dry-run only prints the mpiexec command, which restarts and stops nothing"
                )
    if args.command != "k8s":
        return None
    mpijob = args.mpi or args.servers == 0
    if not mpijob and set_by_operator(parser, args, "slots_per_worker"):
        shape = "a parameter-server job" if args.servers is None else f"--servers {args.servers}"
        return (
            f"--slots-per-worker {args.slots_per_worker} is for an MPIJob (--servers 0 or --mpi); "
            f"{shape} runs one rank per worker pod"
        )
    return None


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The launcher's own arguments and what follows the first ``--``."""
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1 :]
    return argv, []


def parse_own(
    parser: argparse.ArgumentParser, own: Sequence[str], rest: Sequence[str] = ()
) -> argparse.Namespace:
    """The launcher's own arguments ``own`` parsed, a flag that would change nothing refused
    as argparse refuses a bad one (:func:`ignored_flag`), arguments no option takes by the
    command's parser, with where a train flag goes (:func:`launcher.usage_hint.unrecognized`;
    ``rest`` is what followed ``--``): refused by the top-level parser, they showed its usage
    alone. A usage error (or ``--help``) gives the stop signals back first
    (:func:`launcher.interrupt.release`): the launcher called as a function, in a process that
    goes on, kept its SIGTERM for good, which then stopped nothing.
    """
    try:
        args, extra = parser.parse_known_args(own)
        args.own = tuple(own)  # the launch's own words, for a hint that names it changed
        if extra:
            from .async_launch import async_told  # on this error only
            from .commands import names_a_program
            from .usage_hint import choice_values, refused, unrecognized

            command = args.command_parser
            options = [o for a in command._actions for o in a.option_strings]
            values, given = choice_values(command, own[own.index(args.command) + 1 :])
            owned = owned_by(args)  # None without shards: a worker picks its transport
            flags = owned and owned[0]
            elsewhere = False  # a program only the other hosts have: mpi's over hosts
            if args.command == "mpi":
                from .mpi import hosts_elsewhere

                elsewhere = hosts_elsewhere(args)
            hint = unrecognized(
                own,
                extra,
                rest,
                options,
                flags,
                lambda a: refused(args, a),
                values,
                given,
                elsewhere,
            )
            # 'mpi ... --mode async': the words before -- no option took are train's after it
            train = rest if names_a_program(rest) else [*extra, *rest]
            args.command_parser.error(async_told(hint, args, train))
        ignored = ignored_flag(args.command_parser, args)
        if ignored:
            args.command_parser.error(ignored)
    except SystemExit:  # its status already set (128 + a signal kept meanwhile)
        release()
        raise
    return args
