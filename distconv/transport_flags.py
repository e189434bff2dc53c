"""What ``distconv train``'s distributed flags mean beyond their parsing: each transport's
settings, which transport a flag is for, and whether this process is a rank of an MPI job
(which decides how a failure before MPI starts must end it).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import NoReturn

from distconv.runtime import RuntimeConfigError

#: each transport setting's flag (the settings: ``distributed.TRANSPORT_OPTIONS``)
SETTING_FLAGS = {
    "timeout": "--timeout",
    "insecure": "--insecure",
    "bucket_bytes": "--bucket-mb",
    "grad_dtype": "--grad-dtype",
    "push_bytes": "--push-kb",
}
#: the flags that name the servers and their keys, which pserver sync alone takes
SERVER_FLAGS = {"pservers": "--pservers", "keys_dir": "--keys"}
#: the flags that say how ``--health-port`` serves the probes, which nothing reads without it
PROBE_FLAGS = {"health_host": "--health-host", "stall_seconds": "--stall-seconds"}


def sync_options(args: argparse.Namespace) -> dict:
    """The transport settings given on the command line (the transport picks its own)."""
    options = {
        "timeout": args.timeout,
        "insecure": args.insecure or None,
        "bucket_bytes": int(args.bucket_mb * 2**20) if args.bucket_mb is not None else None,
        "grad_dtype": args.grad_dtype,
        "push_bytes": args.push_kb * 1024 if args.push_kb is not None else None,
    }
    return {k: v for k, v in options.items() if v is not None}


def transports_taking(flag: str) -> list[str]:
    """The transports a flag of ``distconv train`` is for (every one, for a flag of none)."""
    from distconv.distributed import TRANSPORT_OPTIONS  # numpy, the syncs: not at every start

    if flag in SERVER_FLAGS.values():
        return ["pserver"]
    settings = [setting for setting, named in SETTING_FLAGS.items() if named == flag]
    if not settings:
        return list(TRANSPORT_OPTIONS)
    return [t for t, taken in TRANSPORT_OPTIONS.items() if settings[0] in taken]


def unused_flag(flag: str, kind: str) -> str | None:
    """Why ``flag`` does nothing in a run that uses ``kind`` sync; None where it does."""
    takers = transports_taking(flag)
    if kind in takers:
        return None
    return f"{flag} is for --sync {' or '.join(takers)}, and this run uses {kind} sync"


def refuse_unused_flags(args: argparse.Namespace, kind: str) -> None:
    """Refuse a flag given for another transport than ``kind``, the one this run uses: the
    user asked for something (half the bytes on the wire, a list of servers) it would not do.

    Raises:
        RuntimeConfigError: naming the flag, the transports it is for and this run's.
    """
    given = [SETTING_FLAGS[setting] for setting in sync_options(args)]
    given += [flag for name, flag in SERVER_FLAGS.items() if getattr(args, name)]
    for flag in given:
        problem = unused_flag(flag, kind)
        if problem is not None:
            raise RuntimeConfigError(problem)


def refuse_probe_flags_without_port(args: argparse.Namespace) -> None:
    """Refuse ``--health-host`` or ``--stall-seconds`` without ``--health-port``: no probes are
    served, so the interface or the limit asked for did nothing. Not part of
    :func:`refuse_unused_flags`, which a launch runs on the train arguments after ``--``,
    where a Kubernetes deployment adds ``--health-port`` itself.

    Raises:
        RuntimeConfigError: naming the flag and the missing ``--health-port``.
    """
    probes = [flag for name, flag in PROBE_FLAGS.items() if getattr(args, name) is not None]
    if probes and args.health_port is None:
        raise RuntimeConfigError(
            f"{probes[0]} is a setting of the probes, and this run serves none; add "
            "--health-port PORT"
        )


def mpi_train_rank(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is ``train`` with the MPI sync (chosen or implied), or the local one,
    and an MPI launcher started this process as one of several ranks. Read before (or without)
    the full parse, which may be what failed: ``--sync`` and ``--pservers`` as argparse reads
    them. A local rank is always refused there (local sync trains alone), and ranks of the MPI
    sync beside it (an MPMD job) would wait for it in ``MPI_Init`` for ever."""
    argv = [a for a in argv if a not in ("-q", "--quiet")]  # the only options before it
    if not argv or argv[0] != "train":
        return False
    # imported past the check: every failed command reads this, and the module imports the syncs
    from distconv.distributed import mpi_launcher_size

    if mpi_launcher_size() < 2:
        return False
    sniff = _sniffer()
    try:
        given, _ = sniff.parse_known_args(argv[1:])
    except (argparse.ArgumentError, SystemExit):  # e.g. --sync with no value: none chosen
        given = argparse.Namespace(sync=None, pservers=None)
    if given.sync is not None:
        return given.sync in ("mpi", "local")
    return not (given.pservers or os.environ.get("DISTCONV_PSERVERS"))


class _Sniffer(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # no usage on stderr: the full parse says it
        raise argparse.ArgumentError(None, message)


def _sniffer() -> argparse.ArgumentParser:
    """A parser of ``distconv train``'s flags, every one read as text, that abbreviates as the
    real one does: with ``--sync`` and ``--pservers`` alone, ``--s local`` read as
    ``--sync local`` where the full parse refuses it as ambiguous (``--seed``)."""
    from distconv.train_args import train_parser  # not at import: it imports the transports

    sniff = _Sniffer(add_help=False, exit_on_error=False)
    for action in train_parser()._actions:
        if action.option_strings:
            value = {"action": "count"} if action.nargs == 0 else {"nargs": action.nargs}
            sniff.add_argument(*action.option_strings, dest=action.dest, **value)
    return sniff
