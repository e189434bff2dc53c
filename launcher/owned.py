"""The ``distconv train`` flags a launch sets itself, and why each is refused when given
(:func:`launcher.commands.refuse_owned_flags`); the checks a local or mpi launch makes of
what follows ``--`` (:func:`refuse_after_dashes`), which its run and the hints of its usage
errors share."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .commands import Program

#: distconv train flags a launch sets itself (see commands.refuse_owned_flags), and why
DROP = "; drop it from the train arguments"
ONLY_LAUNCHER = (
    "the launcher already sets it, on the workers and the shards, from {}; "
    "pass it only to the launcher"
)
LOCAL_OWNED = {
    "--rank": "the launcher gives each worker its RANK" + DROP,
    "--world-size": "the launcher sets WORLD_SIZE from --workers" + DROP,
    "--pservers": "the launcher gives the workers its shards' addresses" + DROP,
    "--keys": "the launcher gives the workers the job's keys (<run-dir>/keys)" + DROP,
    "--insecure": ONLY_LAUNCHER.format("distconv-launch local --insecure"),
    "--job-id": ONLY_LAUNCHER.format("distconv-launch local --job-id"),
}
MPI_OWNED = {
    "--rank": "MPI gives each rank its rank" + DROP,
    "--world-size": "-np sets the world size" + DROP,
    **dict.fromkeys(
        ("--pservers", "--keys", "--insecure"),
        "a parameter-server flag, and this launch trains with allreduce" + DROP,
    ),
}

#: where asynchronous SGD is set in a launch: on its shards, by the launcher's own flags
ASYNC_HINT = (
    "asynchronous SGD is the shards' setting, a flag of the launcher's before --: "
    "distconv-launch local (or k8s) --mode async --max-staleness N"
)


def async_hint(argv: Sequence[str]) -> str:
    """``"; "`` and :data:`ASYNC_HINT` where ``argv`` (train arguments after ``--``) asks for
    asynchronous SGD (:func:`distconv.async_hint.asks_async`, the test ``distconv train``'s
    own refusals make), or that sync is the shards' default where it gives ``--mode`` another
    value (``--mode sync``: :func:`distconv.async_hint.mode_hint`), else ``""``."""
    from distconv.async_hint import mode_hint

    told = mode_hint(argv, ASYNC_HINT)
    return f"; {told}" if told else ""


def owned_by(args: argparse.Namespace) -> tuple[Mapping[str, str], str] | None:
    """The train flags the launch ``args`` sets itself (flag -> why) and the ``--sync`` its
    workers train with; None where the workers pick their own transport (local without
    shards) or nothing is launched (a k8s render, checked by
    :func:`launcher.k8s.checked_manifests`)."""
    if args.command == "mpi":
        return MPI_OWNED, "mpi"
    if args.command == "local" and args.servers:
        return LOCAL_OWNED, "pserver"
    return None


def refuse_after_dashes(args: argparse.Namespace, program: Program) -> None:
    """The checks a local or mpi launch ``args`` makes of ``program``, what follows ``--``,
    before anything starts: the train flags it sets itself, a flag of another transport
    than its workers', and a program of this host its workers (or mpi's ranks) cannot start.
    :func:`launcher.cli.run_local` and ``run_mpi`` run them, and the hint of a usage error
    (:func:`launcher.usage_hint.refused`) runs them on what it would put after ``--``.

    Raises:
        UsageError: a train flag refused (set by the launch, or another transport's): exit
            status 2, as a train value argparse refuses.
        LaunchError: a program its workers (or ranks) cannot start.
    """
    from .commands import LaunchError, refuse_other_transport_flags, refuse_owned_flags

    owned = owned_by(args)
    if owned is None:  # the worker picks its transport; another one's flag fails every start
        refuse_other_transport_flags(program)
    else:
        refuse_owned_flags(program, *owned)
    if args.command == "mpi":
        from .mpi import launch_hosts, refuse_unstartable  # mpi's imports: for mpi only

        try:
            hosts = launch_hosts(args)
        except LaunchError:  # run_mpi refuses it next, in its own words; a hint leaves it
            return
        # ranks on other hosts start their own copy, which this host cannot look at
        refuse_unstartable(program, hosts)
    elif args.command == "local":
        from .shown import shown
        from .startable import local_problem

        # every worker would fail at its start ('./data.csv', no execute bit, no #! line),
        # after the shards, the keys and the run directory
        problem = local_problem(program)
        if problem is not None:
            raise LaunchError(f"cannot start {shown(program.argv[0])}: {problem}")
