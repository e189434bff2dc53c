"""Pure builders for the processes of a local job: what to run, with which environment.

Nothing here starts a process, opens a socket or touches the disk, so tests assert the exact
commands (Horovod's runner is the model). The supervisor (:mod:`.supervisor`) runs what these
functions describe; :mod:`.ports` reserves the shards' ports; :mod:`.child_environ` makes each
child's environment.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

# the children's environment, still importable from here (the CLI and tests import it so)
from .child_environ import BLAS_THREAD_VARS as BLAS_THREAD_VARS
from .child_environ import PLACEMENT_PREFIXES as PLACEMENT_PREFIXES
from .child_environ import PLACEMENT_VARS as PLACEMENT_VARS
from .child_environ import THREAD_VARS as THREAD_VARS
from .child_environ import JobEnv as JobEnv
from .child_environ import child_env as child_env
from .child_environ import clean_environ as clean_environ
from .child_environ import threads_per_process as threads_per_process
from .child_environ import unpassed_threads as unpassed_threads
from .child_environ import usable_cpus as usable_cpus
from .owned import async_hint
from .shown import shown
from .startable import missing_here
from .train_words import flag_slip, train_arguments


class LaunchError(ValueError):
    """The launch cannot be described: bad counts, an unknown program, a malformed hostfile."""


class UsageError(LaunchError):
    """Train arguments after ``--`` that ``distconv train`` or the launch refuses: a value
    argparse refuses (``--epochs -1``), a flag train does not take (``--mode async``), one
    the launch sets itself (``--rank``) or of another transport (``--push-kb`` under mpi).
    One line, and exit status 2, as argparse's usage errors: the same slip after ``--``
    exited 1 or 2 by which check caught it."""


@dataclass(frozen=True)
class Program:
    """What runs in each worker: ``distconv train`` with arguments, or the user's own program.

    Attributes:
        argv: for ``distconv train``, the train arguments; otherwise the full command
            (a ``.py`` file comes first, the interpreter is added by the builders).
        is_train: True when ``argv`` are ``distconv train`` arguments.
        elsewhere: True where it runs on other hosts (mpi's), whose paths this host cannot
            judge (:func:`with_out` leaves their ``--out`` to them).
    """

    argv: tuple[str, ...]
    is_train: bool
    elsewhere: bool = False

    @property
    def is_script(self) -> bool:
        """True when the program is a Python file, run with this interpreter."""
        return not self.is_train and self.argv[0].endswith(".py")


def parse_program(args: Sequence[str], elsewhere: bool = False) -> Program:
    """Decide what follows ``--``: ``distconv train`` arguments, a ``.py`` file or a program.

    Train arguments start with an option (``--epochs 2``) or with the words ``train`` or
    ``distconv train`` (``distconv -q train``, ``python3 -m distconv train``), which are
    dropped: the launch's own train, with its ``--out`` and checks. Their flags are spelled
    out as train reads them (``--ou x`` is ``--out x``), so that the options the launcher adds
    see them. Anything else must be a ``.py`` file or a program found on ``PATH``, which then
    runs instead, as ``torchrun`` runs any script. Where it runs ``elsewhere`` (mpi's ranks
    on other hosts, which start their own copy), one missing here is theirs to find.

    Raises:
        LaunchError: the first word is neither an option nor a file or program that exists
            (here, unless ``elsewhere``), or is a folder here.
        UsageError: train arguments ``distconv train``'s parser refuses (``--epochs -1``), a
            flag it does not take or that abbreviates several, or --resume with --overwrite;
            a train flag's dashes left out (``epochs 2``: :func:`flag_slip`).
    """
    args = tuple(args)
    train = train_arguments(args)
    if train is not None:
        return _train_program(train, elsewhere)
    first = args[0]
    if (slip := flag_slip(args, elsewhere)) is not None:  # '-- epochs 2', over other hosts too
        raise UsageError(slip)
    missing = missing_here(first)  # './data/': a folder, not 'does not exist'
    # '/opt/on-nodes/prog': each node's own file, which run_mpi notes is not here
    if missing is not None and not (elsewhere and not os.path.isdir(first)):
        raise LaunchError(missing)
    return Program(args, is_train=False)


def names_a_program(args: Sequence[str]) -> bool:
    """Whether ``args`` (what follows ``--``) name a program of the user's rather than
    ``distconv train`` arguments, which start with an option or the words naming train
    (``train``, ``distconv train``: :func:`launcher.train_words.launch_words`)."""
    return train_arguments(args) is None


def _train_program(args: tuple[str, ...], elsewhere: bool) -> Program:
    from distconv.train_args import FlagError, spelled_out  # numpy and all: for train jobs only

    try:
        argv = tuple(spelled_out(args))
    except FlagError as exc:
        hint = async_hint(args)  # '-- --mode async': the launcher's flag, before --
        raise UsageError(f"{exc} (the arguments after -- are distconv train's{hint})") from None
    # distconv train refuses the two together: said here once, not by every rank and restart
    if has_option(argv, "--overwrite") and has_option(argv, "--resume"):
        raise UsageError("distconv train takes --resume or --overwrite, not both")
    parse_train_values(argv)
    return Program(argv, is_train=True, elsewhere=elsewhere)


def parse_train_values(argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``argv`` once with ``distconv train``'s own parser: a bad value (``--epochs -1``,
    ``--out`` without one) is said here, before any shard or worker starts, not by every
    worker of every restart. Returns what it parsed, for the checks that need the values.

    Raises:
        UsageError: argparse's message, with where the arguments came from; also for
            ``-h``/``--help``, whose help and exit 0 would stand for a job (or manifests).
    """
    from distconv.train_args import parse_train_values as parse

    def refuse(message: str) -> NoReturn:  # '--sync async': told where async SGD is set
        raise UsageError(f"{message} (in the distconv train arguments after --{async_hint(argv)})")

    help_refused = "-h/--help starts no job and renders no manifest; see distconv train --help"
    return parse(argv, refuse, help_refused, async_hint="")  # refuse says the launcher's


def has_option(argv: Sequence[str], name: str) -> bool:
    """True when ``argv`` holds option ``name`` as ``--name`` or ``--name=value``."""
    return any(a == name or a.startswith(name + "=") for a in argv)


def option_value(argv: Sequence[str], name: str) -> str | None:
    """The value of ``--name value`` or ``--name=value`` in ``argv`` (the last one wins)."""
    value = None
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def refuse_owned_flags(program: Program, owned: Mapping[str, str], sync: str) -> None:
    """Refuse ``distconv train`` flags this launch sets itself (``owned``: flag -> what sets
    it), and a ``--sync`` other than the launch's: after ``--`` they would win over the
    launcher's (a worker with ``--pservers`` or ``--insecure`` of its own waits 90 s for shards
    that never answer it; two workers with ``--rank 0`` clash on the run directory), so say
    so before anything starts, once, not after every restart. So is a flag of another
    transport than ``sync`` (``--push-kb`` under mpi; :func:`refuse_other_transport_flags`).

    Raises:
        UsageError: one line naming the flag, what sets it and what to do (``owned``'s text),
            or the transports the flag is for.
    """
    if not program.is_train:
        return
    for name, setter in owned.items():
        if has_option(program.argv, name):
            raise UsageError(f"{name} after --: {setter}")
    chosen = option_value(program.argv, "--sync")
    if chosen is not None and chosen != sync:
        raise UsageError(f"--sync {chosen} after --, but this launch trains with --sync {sync}")
    refuse_other_transport_flags(program, sync)


def refuse_other_transport_flags(program: Program, sync: str | None = None) -> None:
    """Refuse a train flag for another transport than the one every worker uses: ``sync``,
    or, for None, the one a worker of a job without shards picks itself (its ``--sync``, else
    pserver with ``--pservers``, else local: the launcher leaves it no shards and no MPI).
    Every worker would refuse the flag at start, again on every restart, with the message of
    ``distconv train``'s own check, which this runs.

    Raises:
        UsageError: the flag, the transports it is for and this run's.
    """
    if not program.is_train:
        return
    # imported here: the transports import numpy, which a user program's launch never needs
    from distconv.runtime import RuntimeConfigError
    from distconv.transport_flags import refuse_unused_flags

    values = parse_train_values(program.argv)
    kind = sync or values.sync or ("pserver" if values.pservers else "local")
    try:
        refuse_unused_flags(values, kind)
    except RuntimeConfigError as exc:
        raise UsageError(f"{exc} (the train arguments after --)") from None


def with_out(program: Program, run_dir: str | os.PathLike) -> Program:
    """``program`` writing into ``run_dir/train`` unless it is not distconv train or names its
    own ``--out``: every way of launching keeps a job's checkpoints in its run directory.

    Raises:
        LaunchError: its own ``--out`` cannot be made on this host, where it runs
            (:func:`refuse_unusable_out`).
    """
    if not program.is_train:
        return program
    if has_option(program.argv, "--out"):
        refuse_unusable_out(program)
        return program
    return Program((*program.argv, "--out", os.path.join(run_dir, "train")), True)


def refuse_unusable_out(program: Program) -> None:
    """Refuse train arguments whose ``--out`` cannot be made (a file where a folder must be, in
    ``distconv train``'s own words: :func:`~distconv.out_folder.out_folder_problem`; a folder
    this process cannot make or write in, as a shard asks of its ``--checkpoint-dir``:
    :func:`~distconv.out_folder.out_write_problem`), or that a live process holds (another
    job's run: :func:`~distconv.run_holder.lock_holder`, refused in the run's own words), before
    anything starts: under ``distconv-launch local`` the shards, which keep their
    checkpoint parts there, met it first, as ``--checkpoint-dir PATH: cannot make it``, a
    flag the user never gave. Paths on other hosts (:attr:`Program.elsewhere`) are theirs.

    Raises:
        LaunchError: naming the ``--out`` after ``--`` and why.
    """
    from distconv.out_folder import out_folder_problem, out_write_problem
    from distconv.run_holder import in_use_refusal, lock_holder

    out = option_value(program.argv, "--out")
    if program.elsewhere or out is None:
        return
    if (problem := out_folder_problem(out, shown) or out_write_problem(out, shown)) is not None:
        raise LaunchError(
            f"--out after --: {problem} (give another --out, or none: the job's run directory "
            "then holds the run)"
        )
    # another job's run there: its rank 0 would be refused after the shards and workers had
    # started, and a restart taking the lock once that run ended would --overwrite it
    if (holder := lock_holder(out)) is not None:
        raise LaunchError(f"--out after --: {in_use_refusal(Path(out), holder)}")


def refuse_past_the_shards_bound(workers: int) -> None:
    """Raise UsageError where a shard would refuse ``--workers`` (config.MAX_WORKERS): it
    refused at its start, after every worker was started (or ``distconv keys`` before it)."""
    from distconv.sync.ps.config import check_workers

    try:
        check_workers(workers)
    except ValueError as exc:
        raise UsageError(f"{exc} (the most a parameter-server shard serves)") from None


def train_args(program: Program, sync: str | None) -> list[str]:
    """``distconv train`` arguments, the same for every start of the job.

    Adds ``--sync SYNC`` unless the user chose a transport; a resume mode stays as the user
    gave it. A restart needs none added: ``distconv train`` told it is one
    (``DISTCONV_RESTART``) continues the run this launch began (``DISTCONV_LAUNCH``) given no
    ``--resume`` or given ``--overwrite``, and otherwise refuses or replaces as its first start
    did. An added ``--resume auto`` resumed whatever run was in ``--out``: one the first start
    had refused to touch too.
    """
    argv = list(program.argv)
    if sync is not None and not has_option(argv, "--sync"):
        argv = ["--sync", sync, *argv]
    return argv


def worker_command(program: Program, sync: str | None, python: str = sys.executable) -> list[str]:
    """The command of one local worker: every worker runs the same one (ranks come from env),
    on every start (a restart is told by ``DISTCONV_RESTART``)."""
    if program.is_train:
        return [python, "-m", "distconv", "train", *train_args(program, sync)]
    if program.is_script:
        return [python, *program.argv]
    return list(program.argv)


@dataclass(frozen=True)
class ServerOptions:
    """How the parameter-server shards of a local job run."""

    num_shards: int
    workers: int
    mode: str = "sync"
    job_id: str = ""
    keys_dir: str | None = None
    checkpoint_dir: str | None = None
    host: str = "127.0.0.1"
    drain_seconds: float = 0.0
    extra: tuple[str, ...] = field(default=())
    #: async: the shards' ``--max-staleness``; None leaves them their default
    max_staleness: int | None = None
    #: the shards' ``--timeout``: the workers' own (:func:`train_timeout`), so that a shard
    #: names a worker that never comes before the workers, which wait 1.5x as long, give up
    #: on the shard; None leaves them their default (60 s)
    timeout: float | None = None


def server_command(
    shard: int, port: int, opts: ServerOptions, python: str = sys.executable, fd: int | None = None
) -> list[str]:
    """``python -m distconv pserver ...`` for shard ``shard`` listening on ``port``, on the
    inherited socket ``fd`` where given (``--bind-fd``: :func:`.ports.reserve_ports`)."""
    from distconv.shard_timeout import exact_text, shard_timeout_flag  # as the k8s shards'

    argv = [python, "-m", "distconv", "pserver", "--bind", f"{opts.host}:{port}"]
    if fd is not None:
        argv += ["--bind-fd", str(fd)]
    argv += ["--shard", str(shard), "--num-shards", str(opts.num_shards)]
    argv += ["--workers", str(opts.workers), "--mode", opts.mode]
    if opts.max_staleness is not None:
        argv += ["--max-staleness", str(opts.max_staleness)]
    argv += shard_timeout_flag(opts.timeout)
    if opts.job_id:  # a shard serves only requests that name its job
        argv += ["--job-id", opts.job_id]
    if opts.keys_dir is not None:
        argv += ["--keys", opts.keys_dir]
    if opts.checkpoint_dir is not None:
        argv += ["--checkpoint-dir", opts.checkpoint_dir]
    # a shard signalled with its workers (the launcher killed: the kernel's parent-death
    # SIGTERM reaches all at once; systemd stopping the cgroup) serves until they have
    # checkpointed; the launcher's own stop adds SIGINT, which stops a shard at once
    argv += ["--drain-seconds", exact_text(opts.drain_seconds)]
    return argv + list(opts.extra)


def train_timeout(program: Program) -> float | None:
    """The ``--timeout`` of ``distconv train`` arguments (checked by :func:`parse_program`),
    which the shards are given too (:attr:`ServerOptions.timeout`); None for none, or for a
    program of the user's, whose own ``timeout=`` the launcher cannot see. The same reading
    gives a rendered Kubernetes job's shards theirs
    (:func:`distconv.shard_timeout.workers_timeout`).

    Raises:
        UsageError: a ``--timeout`` below a shard's least (0.2 s), which the shards cannot
            take: refused before anything starts, rather than every worker warning of it.
    """
    if not program.is_train:
        return None
    from distconv.shard_timeout import below_the_shards_least, workers_timeout  # train's parser

    seconds = workers_timeout(program.argv)
    if seconds is not None and (why := below_the_shards_least(seconds)) is not None:
        raise UsageError(why)
    return seconds


def keys_command(keys_dir: str, workers: int, python: str = sys.executable) -> list[str]:
    """``python -m distconv keys DIR --workers N``: the job's CURVE key files."""
    return [python, "-m", "distconv", "keys", keys_dir, "--workers", str(workers)]


def new_launch() -> str:
    """A token for one invocation of the launcher (``DISTCONV_LAUNCH``), the same over its
    restarts: a restarted ``distconv train`` (no ``--resume``, or ``--overwrite``) tells the
    checkpoints of its own launch by it from those of an earlier launch of the same
    ``--job-id``."""
    return secrets.token_hex(8)
