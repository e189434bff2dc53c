"""The ``distconv-launch`` command: ``local``, ``mpi`` and ``k8s``.

Everything after ``--`` is what each worker runs: ``distconv train`` arguments by default, or a
``.py`` file or program of the user's, which then gets the same roles, ranks, supervision and
restarts (see :func:`.commands.parse_program`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import secrets
import shlex
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from distconv.build_identity import build_id
from distconv.files import folder_problem
from distconv.messages import debugging, exception_line, note_lines
from distconv.procfs import process_identity

from .async_launch import async_retelling
from .commands import (
    BLAS_THREAD_VARS,
    THREAD_VARS,
    JobEnv,
    LaunchError,
    Program,
    ServerOptions,
    UsageError,
    child_env,
    clean_environ,
    new_launch,
    option_value,
    parse_program,
    refuse_past_the_shards_bound,
    server_command,
    threads_per_process,
    train_timeout,
    unpassed_threads,
    with_out,
    worker_command,
)
from .failure import signal_name
from .go_on import go_on_hint, names_its_run
from .interrupt import arm, release
from .job_keys import make_keys
from .json_lines import json_lines, last_line
from .k8s import run_k8s
from .launch_record import record_launch
from .options import (
    PROG,
    add_k8s_options,
    add_local_options,
    add_mpi_options,
    parse_own,
    split_argv,
)
from .owned import refuse_after_dashes
from .ports import drain_queued, reserve_ports
from .pyenv_shim import one_launch
from .resume_run_dir import check_resume_in_a_new_run_dir
from .run_dir import run_dir_refused
from .shown import shown
from .ssh_connect import ssh_connect_bound
from .startable import missing_here
from .stderr_line import BoundedParser, quote_user_values, write_last
from .stdout import write_stdout
from .supervisor import ChildSpec, Supervisor


def _job_id(args: argparse.Namespace) -> str:
    if args.job_id is not None:  # checked by its type (options.job_name)
        return args.job_id
    return f"launch-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(4)}"


def _run_dir(args: argparse.Namespace, job_id: str) -> Path:
    """The job's run directory: ``--run-dir``, else ``runs/<job-id>``.

    Raises:
        LaunchError: it or a folder above it (``runs/``) is a file or a symlink to nowhere.
    """
    run_dir = Path(args.run_dir or os.path.join("runs", job_id)).absolute()
    problem = folder_problem(run_dir, shown)
    if problem is not None:
        raise run_dir_refused(run_dir, problem)
    return run_dir


def local_plan(
    args: argparse.Namespace, program: Program, job_id: str, run_dir: Path, environ
) -> tuple[ServerOptions | None, JobEnv, list[str]]:
    """Server options, shared environment and the worker program of a local job."""
    if program.is_train and args.servers == 0 and args.workers > 1:
        raise UsageError(  # a combination of flags: exit 2, as the launcher's other refusals
            "distconv train with several workers needs parameter servers (--servers M >= 1) "
            "or allreduce (distconv-launch mpi)"
        )
    if args.servers:
        refuse_past_the_shards_bound(args.workers)
    worker_argv = list(with_out(program, run_dir).argv)
    out = None
    if program.is_train:
        out = option_value(worker_argv, "--out")
        if args.insecure and args.servers:
            worker_argv += ["--insecure"]
    keys_dir = None if args.insecure or not args.servers else str(run_dir / "keys")
    servers = None
    if args.servers:
        checkpoint_dir = out or str(run_dir / "checkpoints")
        servers = ServerOptions(
            num_shards=args.servers,
            workers=args.workers,
            mode=args.mode,
            max_staleness=args.max_staleness,
            timeout=train_timeout(program),
            job_id=job_id,
            keys_dir=keys_dir,
            checkpoint_dir=checkpoint_dir,
            drain_seconds=args.grace,
            extra=("--insecure",) if args.insecure else (),
        )
    # shards take one thread each (set in local_children) but share the cores all the same
    threads = args.threads or threads_per_process(args.workers + args.servers)
    job = JobEnv(
        job_id=job_id,
        keys_dir=keys_dir,
        threads=threads,
        launch=new_launch(),
        insecure=bool(args.insecure and args.servers),
        launcher=process_identity(),
    )
    return servers, job, worker_argv


def local_children(
    program: Program,
    servers: ServerOptions | None,
    job: JobEnv,
    workers: int,
    restart: int,
    environ,
    ports: Sequence[int] = (),
    fds: Sequence[int] = (),
) -> list[ChildSpec]:
    """Every child of one attempt of a local job: the shards first, then the workers. Shard
    ``i`` serves on ``ports[i]``, on the inherited socket ``fds[i]`` where given."""
    pservers = tuple(f"{servers.host}:{p}" for p in ports) if servers else ()
    job = dataclasses.replace(job, pservers=pservers, restart=restart)
    specs = []
    if servers is not None:
        shard_job = dataclasses.replace(job, threads=1)
        for shard, port in enumerate(ports):
            env = child_env(environ, shard_job, "server", shard, servers.num_shards)
            fd = fds[shard] if fds else None
            argv = server_command(shard, port, servers, fd=fd)
            # by the time the supervisor stops a shard its workers are gone: SIGINT stops it at
            # once; SIGTERM first, for a shard not up yet (its default action) or started with
            # SIGINT ignored (a script's `&`), where SIGTERM's drain ends with no worker in
            stop = (signal.SIGTERM, signal.SIGINT)
            inherits = () if fd is None else (fd,)
            specs.append(ChildSpec("server", shard, argv, env, stop_signals=stop, fds=inherits))
    sync = "pserver" if servers is not None else None
    argv = worker_command(program, sync)
    for rank in range(workers):
        specs.append(
            ChildSpec("worker", rank, argv, child_env(environ, job, "worker", rank, workers))
        )
    return specs


def _hinted(supervisor: Supervisor, args: argparse.Namespace, job_id: str, status: int) -> int:
    """``status``, after the line saying how to go on where a stop ended the launch (its way
    with the supervisor's train arguments, where the workers run ``distconv train``)."""
    if hint := go_on_hint(args, job_id, status, supervisor.stopped_by, supervisor.train):
        supervisor.say(hint)
    return status


@one_launch()
def run_local(args: argparse.Namespace, rest: list[str]) -> int:
    """``distconv-launch local``: supervise N workers and M shards on this host."""
    with async_retelling(args, rest):  # '-- --mode async': the hint names this launch, async
        program = parse_program(rest)
        refuse_after_dashes(args, program)
    check_resume_in_a_new_run_dir(args, program)  # before anything is made or started
    own_out = option_value(program.argv, "--out") if program.is_train else None  # the keys' hint
    job_id = _job_id(args)
    run_dir = _run_dir(args, job_id)
    servers, job, worker_argv = local_plan(args, program, job_id, run_dir, os.environ)
    program = Program(tuple(worker_argv), program.is_train)
    lines = json_lines(rest, job_id)
    named = names_its_run(args)
    supervisor = Supervisor(
        run_dir,
        args.grace,
        settle=args.settle,
        lines=lines,
        job_id=job_id,
        run_named=named,
        train=program.argv if program.is_train else None,
    )
    reserved: list = []
    try:  # run() lets the run directory go; a refusal or a stop before it must too
        supervisor.claim()  # before the keys: a launch running there may be making its own
        reused = job.keys_dir is not None and make_keys(
            Path(job.keys_dir), args.workers, program.is_train and own_out is None, own_out
        )
        if reused:
            keys = {"keys": job.keys_dir}
            supervisor.say(f"reusing the job's CURVE keys in {shown(job.keys_dir)}", paths=keys)
        logs = run_dir / "logs"
        supervisor.say(
            f"job {job_id}: {args.workers} worker(s), {args.servers} server(s); logs in "
            f"{shown(logs)}; distconv {build_id()}",  # which code the job ran
            paths={"logs": logs},
        )
        if note := unpassed_threads(os.environ, args.threads, job.threads):
            supervisor.say(note, level="warning")  # a shell's count, which a plain run takes
        record_launch(supervisor)  # launch.json: this command, build, numpy, host, time
        # held till the launcher exits: each attempt's shards serve on them, no one else's
        reserved = reserve_ports(args.servers) if servers else []
        ports, fds = [s.getsockname()[1] for s in reserved], [s.fileno() for s in reserved]

        def build(restart: int) -> list[ChildSpec]:
            if restart:  # the last attempt's workers' connections, queued while no shard was
                drain_queued(reserved)  # up: the new shard would take them for probes
            return local_children(
                program, servers, job, args.workers, restart, os.environ, ports, fds
            )

        status = supervisor.run(build, args.max_restarts)
        return _hinted(supervisor, args, job_id, status)
    finally:
        for sock in reserved:
            sock.close()
        supervisor.unclaim()


@one_launch()
def run_mpi(args: argparse.Namespace, rest: list[str]) -> int:
    """``distconv-launch mpi``: build the mpiexec command; print it or supervise it."""
    from .mpi import (
        MpiOptions,
        check_slots,
        detect_flavor,
        env_changes,
        find_mpiexec,
        hosts_elsewhere,
        launch_hosts,
        most_ranks_on_a_host,
        mpi_command,
        mpi_worker_command,
    )
    from .mpi_exit import is_status_line, mpiexec_reader

    # ranks on other hosts start their own copy of a program, which this host may lack;
    # hosts that are all this one (-H localhost:2) start this host's. A hostfile that cannot
    # be read counts as other hosts until the arguments after -- are judged: their usage
    # error (exit 2, the async hint) comes first, as before hosts were read here
    elsewhere = hosts_elsewhere(args)
    with async_retelling(args, rest):  # '-- --mode async': a local launch with shards
        program = parse_program(rest, elsewhere)
        refuse_after_dashes(args, program)  # the program only where no hosts are named to read
    check_resume_in_a_new_run_dir(args, program)
    hosts = launch_hosts(args)  # an unreadable hostfile is refused here, in its own words
    # a program not here is started as it is, said once: '-- epochs 2' may be a slip
    missing = missing_here(program.argv[0]) if elsewhere and not program.is_train else None
    notes = [missing and f"on this host, {missing}; the ranks start each host's own copy"]
    note = "; ".join(filter(None, [*notes, unpassed_threads(os.environ, args.threads, None)]))
    opts = MpiOptions(args.np, tuple(hosts), args.oversubscribe, args.allow_run_as_root)
    check_slots(opts)  # before the job is said or its run directory made
    mpiexec = find_mpiexec(args.mpiexec)
    flavor = args.mpi_flavor or detect_flavor(mpiexec)
    job_id = _job_id(args)
    most = most_ranks_on_a_host(args.np, hosts, flavor)
    threads = args.threads or threads_per_process(most)
    # without --threads each rank sizes its kernel threads on its own host (its cores / the
    # ranks MPI put there: distconv.cores.processes_on_this_host); BLAS's pools, sized at
    # numpy's import, get this host's cores over the most ranks a host receives
    exported = THREAD_VARS if args.threads else BLAS_THREAD_VARS
    run_dir, launch = _run_dir(args, job_id), new_launch()
    program = with_out(program, run_dir)

    def build(restart: int) -> list[ChildSpec]:
        env = clean_environ(os.environ)
        env.update(DISTCONV_JOB_ID=job_id, DISTCONV_LAUNCH=launch, DISTCONV_RESTART=str(restart))
        # MPI prefixes each chunk a rank writes with its rank; unbuffered Python writes a line's
        # text and its newline apart, which would split lines. Line-buffered stderr and flushed
        # prints write whole lines.
        env.pop("PYTHONUNBUFFERED", None)
        env.update(dict.fromkeys(exported, str(threads)))
        if not args.threads:
            # as in local mode, only --threads sets the kernel threads: one inherited from
            # the launching shell would reach every rank (-genvall, -x) and override each
            # host's own count
            env.pop("DISTCONV_NUM_THREADS", None)
        # a host that never answers ssh held the launch without a word: ssh gives up in time
        env.update(ssh_connect_bound(flavor, mpiexec, hosts, env))
        argv = mpi_command(mpiexec, flavor, opts, mpi_worker_command(program), env)
        quiet = is_status_line if flavor == "mpich" else None  # -print-all-exitcodes's
        reader = mpiexec_reader(args.np)
        return [ChildSpec("mpiexec", 0, argv, env, prefix="", reader=reader, quiet=quiet)]

    if args.dry_run:
        (spec,) = build(0)
        if note:  # stdout is the command's alone
            write_last(f"{PROG} mpi: note: {note}")  # bounded: a stalled stderr
        line = shlex.join([*env_changes(os.environ, spec.env), *spec.argv]) + "\n"
        write_stdout(line, "the command", "--dry-run prints the command there")
        return 0
    lines, named = json_lines(rest, job_id), names_its_run(args)
    train = program.argv if program.is_train else None  # the way on's --overwrite
    supervisor = Supervisor(
        run_dir, args.grace, lines=lines, job_id=job_id, run_named=named, train=train
    )
    try:  # a stop signal before run(), which lets the run directory go itself
        supervisor.claim()  # in the try: a signal handled as it returns must let it go too
        supervisor.say(
            f"job {job_id}: {args.np} rank(s) under {flavor} {mpiexec}; distconv {build_id()}"
        )
        record_launch(supervisor)  # launch.json: this command, build, numpy, host, time
        if note:
            supervisor.say(note, level="warning")
        status = supervisor.run(build, args.max_restarts)
        return _hinted(supervisor, args, job_id, status)
    finally:
        supervisor.unclaim()


def build_parser() -> argparse.ArgumentParser:
    """The parser for everything before ``--``."""
    parser = BoundedParser(
        prog=PROG,
        description="Start a distconv job: local processes, mpiexec, or Kubernetes manifests. "
        "After --: distconv train arguments, or a program or .py file to run instead.",
    )
    # the launcher's own build, as `distconv --version` says its: the same code, the same digest
    parser.add_argument("--version", action="version", version=f"%(prog)s {build_id()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands = (
        ("local", "workers and parameter servers on this host", add_local_options, run_local),
        ("mpi", "workers under mpiexec (MPICH or OpenMPI), allreduce", add_mpi_options, run_mpi),
        ("k8s", "render Kubernetes manifests for one job", add_k8s_options, run_k8s),
    )
    for name, summary, add_options, handler in commands:
        command = sub.add_parser(name, help=summary)
        add_options(command)
        command.set_defaults(handler=handler, command_parser=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``distconv-launch``; returns the exit status."""
    with one_launch():  # pyenv asked once for the launch, its usage errors' hints included
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    """:func:`main` within its launch's :func:`~launcher.pyenv_shim.one_launch`."""
    own, rest = split_argv(sys.argv[1:] if argv is None else argv)
    args = parse_own(build_parser(), own, rest)  # a usage error gives the stop signals back
    quote_user_values(args, rest)  # the error lines show $'a\nb' as distconv train's do
    json_rest = () if args.command == "k8s" else rest  # only a job's lines turn JSON, no render's
    try:
        arm()  # a stop signal from here (or kept since the imports) ends the launch on one line
        return args.handler(args, rest)
    except (LaunchError, OSError) as exc:
        if debugging():
            raise
        who = f"{PROG} {args.command}"  # its notes (the way out) on lines before the error's
        last_line(f"{who}: error: {exception_line(exc)}", json_rest, note_lines(who, exc))
        # train arguments refused (a value, a flag train does not take, one the launch sets)
        # are a usage error, as argparse's own (the launcher's usage would not show them, so
        # only the line)
        return 2 if isinstance(exc, UsageError) else 1
    except KeyboardInterrupt as stop:  # before the supervisor's handlers (keys, mpiexec -V)
        signum = getattr(stop, "signum", signal.SIGINT)  # launcher.interrupt.Interrupted
        said = "interrupted" if signum == signal.SIGINT else f"stopped by {signal_name(signum)}"
        # a stop asked for, at the level of the launcher's other stop lines
        last_line(f"{PROG} {args.command}: {said} before the job started", json_rest, level="info")
        return 128 + signum
    finally:  # a signal handled at release()'s entry (a call's check), still armed, raises
        try:  # there, before its first line: dropped too, by a second release()
            release()
        except KeyboardInterrupt:
            release()
