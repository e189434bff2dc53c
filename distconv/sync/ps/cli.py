"""``distconv pserver`` (one shard) and ``distconv keys`` (the job's CURVE key files).

Declaring the flags imports nothing from ZeroMQ; the handlers import the server and the key
code when they run, so ``distconv train`` starts without pyzmq.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from typing import TYPE_CHECKING

from distconv.files import describe_os_error, folder, folder_problem
from distconv.job import TrainConfig
from distconv.number_text import decimal, integer
from distconv.out_folder import folder_write_problem
from distconv.runtime import DEFAULT_JOB_ID, ENV_JOB_ID, RuntimeConfigError, job_id_from
from distconv.sync.ps.limits import DEFAULT_MAX_STALENESS, staleness_in_sync
from distconv.train_flag_types import not_blank, port
from distconv.transport_flags import refuse_probe_flags_without_port
from distconv.verbosity import add_verbosity

if TYPE_CHECKING:
    from distconv.sync.ps.config import ShardConfig

#: the probes' interface and stall limit where the flags do not say: a worker's
PROBE_HOST, STALL_SECONDS = TrainConfig.health_host, TrainConfig.stall_seconds


class PserverStartError(ValueError):
    """A shard cannot start with these flags or key files: ``distconv.cli`` prints it as one
    line and exits 1, as any user error (a traceback with ``DISTCONV_DEBUG=1``)."""


def seconds(text: str) -> float:
    """A finite number of seconds above 0 (argparse names the flag in its error)."""
    number = decimal(text)
    if not number > 0:
        raise argparse.ArgumentTypeError(f"must be finite and > 0, got {str(text).strip()}")
    return number


def add_pserver(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``distconv pserver --bind HOST:PORT --shard I --num-shards M --workers N ...``; returns
    its parser (the deploy checks read a shard's command line with it)."""
    p = subparsers.add_parser(
        "pserver",
        help="run one parameter-server shard",
        description="Serve one shard of a parameter-server job. It knows no model: worker 0 "
        "seeds it with its blocks and the optimizer configuration.",
    )
    p.add_argument(
        "--bind", required=True, help="HOST:PORT to listen on; only that interface (port 0: any)"
    )
    p.add_argument(
        "--bind-fd",
        type=integer,
        help="serve on this inherited file descriptor, a TCP socket already listening on "
        "--bind's address and port (distconv-launch reserves its shards' ports so)",
    )
    p.add_argument("--shard", type=integer, required=True, help="this shard's index, from 0")
    p.add_argument("--num-shards", type=integer, required=True, help="shards in the job")
    p.add_argument("--workers", type=integer, required=True, help="workers in the job")
    p.add_argument("--mode", choices=("sync", "async"), default="sync", help="(%(default)s)")
    # no default here: one given in sync mode, which reads none, is refused (unread_staleness)
    p.add_argument(
        "--max-staleness",
        type=integer,
        help="--mode async: drop a gradient more than this many updates behind "
        f"({DEFAULT_MAX_STALENESS}; refused with --mode sync, whose steps take every push)",
    )
    p.add_argument(
        "--on-worker-loss",
        choices=("fail", "continue"),
        default="fail",
        help="async: what losing a worker does to the job (%(default)s): one whose process is "
        "silent past --timeout (no request, no heartbeat), or, with continue, a live one that "
        "a gather waits for that long (docs/protocol.md); losing rank 0 always fails it "
        "(continue is refused with --mode sync, whose steps need every worker)",
    )
    p.add_argument(
        "--timeout",
        type=decimal,
        default=60.0,
        help="seconds any wait for a worker may take before it is named (%(default)s; finite, "
        "at least 0.2)",
    )
    p.add_argument(
        "--drain-seconds",
        type=decimal,
        default=90.0,
        help="after SIGTERM, serve workers that have not said bye for at most this long, so "
        "that a worker stopped by the same eviction checkpoints (%(default)s; SIGINT, or "
        "SIGTERM again a second later, stops at once)",
    )
    security = p.add_mutually_exclusive_group()
    # not blank, as distconv train's: an empty one (an unset variable) read as no --keys at
    # all ('pass --keys DIR', of a --keys given), a blank one as the directory '  '
    security.add_argument(
        "--keys", type=not_blank, help="directory of the job's CURVE keys (distconv keys)"
    )
    security.add_argument(
        "--insecure", action="store_true", help="no CURVE encryption or authentication"
    )
    p.add_argument(
        "--checkpoint-dir",
        type=not_blank,  # a blank one (an unset variable) read as none: no parts, said nowhere
        help="where this shard writes its checkpoint parts, if anywhere: a copy for operators, "
        "never read back (the chief's checkpoint alone is enough to --resume)",
    )
    p.add_argument(
        "--keep-parts",
        type=integer,
        default=3,
        help="checkpoint parts kept when the chief does not say (%(default)s, as the trainer's "
        "--keep-checkpoints; 0: all)",
    )
    # no default here: job_id_from reads DISTCONV_JOB_ID itself, so that a bad id from the
    # environment is blamed on the variable, not on a --job-id that was never given
    p.add_argument(
        "--job-id",
        help=f"the job id workers send (default: ${ENV_JOB_ID}, else {DEFAULT_JOB_ID!r}, as "
        "workers)",
    )
    p.add_argument(
        "--max-message-bytes",
        type=integer,
        default=1 << 30,
        help="largest array payload of one request (%(default)s); bounds what the shard "
        "processes, not what ZeroMQ buffers to receive it",
    )
    p.add_argument(
        "--max-frame-bytes",
        type=integer,
        default=16 << 20,
        help="largest array frame, or --max-message-bytes if smaller (%(default)s: 16 default "
        "blocks); ZeroMQ closes a connection sending a larger one before buffering it",
    )
    p.add_argument(
        "--health-port",
        type=port,
        help="serve /readyz (seeded), /healthz (serving, job not failed) and /metrics on this port "
        "(0: any)",
    )
    # the probes' settings default to None, so that one given without --health-port, which
    # nothing reads, is refused (transport_flags.refuse_probe_flags_without_port)
    p.add_argument(
        "--health-host",
        type=not_blank,  # a blank one bound every interface, where the default is loopback
        help=f"interface of the probes ({PROBE_HOST}; 0.0.0.0 in a pod, for the kubelet)",
    )
    p.add_argument(
        "--stall-seconds",
        type=seconds,
        help=f"/healthz turns 503 when the serving loop is stuck this long ({STALL_SECONDS:g})",
    )
    add_verbosity(p)
    p.set_defaults(handler=functools.partial(run_pserver, parser=p))
    return p


def unread_staleness(args: argparse.Namespace) -> str | None:
    """The refusal of a ``--max-staleness`` given to a sync shard (``--mode sync``, the
    default), which reads it nowhere, in the launcher's words; None where it is not given or
    the mode is not sync (async, or a value the cluster fills in)."""
    if args.max_staleness is None or args.mode != "sync":
        return None
    return staleness_in_sync(args.max_staleness)


def run_pserver(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Serve until SIGTERM (and the workers' ``bye``) or SIGINT. ``parser`` (the command's)
    refuses a flag the mode does not read with its usage, as argparse refuses a bad one."""
    from distconv.sync.ps.keys import KeyFileError
    from distconv.sync.ps.server import run_shard

    problem = unread_staleness(args)
    if problem is not None:  # exit 2 before anything: as distconv-launch local refuses it
        parser.error(problem)
    try:  # as the workers read theirs: a padded id was kept here and stripped there
        job_id = job_id_from({"job_id": args.job_id}, os.environ)
    except RuntimeConfigError as exc:  # it names the flag, or DISTCONV_JOB_ID
        raise PserverStartError(str(exc)) from exc
    config = shard_config(args, job_id)
    try:
        config.check()
    except ValueError as exc:  # a flag out of range
        raise PserverStartError(str(exc)) from exc
    refuse_probe_flags_without_port(args)  # before anything is made
    if args.checkpoint_dir:
        _check_checkpoint_dir(args.checkpoint_dir)
    service = _start_service(args)
    try:
        return run_shard(config, service)
    except KeyFileError as exc:  # the job's keys, read at start
        raise PserverStartError(str(exc)) from exc
    finally:
        if service is not None:
            service.close()


def shard_config(args: argparse.Namespace, job_id: str) -> ShardConfig:
    """The shard's settings from its parsed command line (``job_id`` read apart, from the
    environment too); the deploy checks build it alike, to refuse what :meth:`check` refuses."""
    from distconv.sync.ps.config import ShardConfig

    return ShardConfig(
        bind=args.bind,
        shard=args.shard,
        num_shards=args.num_shards,
        workers=args.workers,
        mode=args.mode,
        max_staleness=DEFAULT_MAX_STALENESS if args.max_staleness is None else args.max_staleness,
        timeout=args.timeout,
        on_worker_loss=args.on_worker_loss,
        keys_dir=args.keys,
        insecure=args.insecure,
        checkpoint_dir=args.checkpoint_dir,
        keep_parts=args.keep_parts,
        job_id=job_id,
        max_message_bytes=args.max_message_bytes,
        max_frame_bytes=args.max_frame_bytes,
        drain_seconds=args.drain_seconds,
        bind_fd=args.bind_fd,
    )


def _check_checkpoint_dir(directory: str) -> None:
    """Check that ``--checkpoint-dir`` can be made, or written where it is, now: the first
    checkpoint request (an epoch in, or hours) found it unusable, the shard refused the chief's
    request, and the chief, which asks the shards before it writes its own part, failed the
    job without any checkpoint. No probe file: the directory may be the chief's
    run directory, whose checks refuse files that no run writes. Checked, never made: the shard
    makes it at its first part (:meth:`~distconv.sync.ps.parts.CheckpointParts.save_part`).
    Under ``distconv-launch local`` it is the chief's ``--out``, which a refused ``--resume``
    must find as it was, not there, rather than an empty folder made by its own shards.

    Raises:
        PserverStartError: the directory cannot be made or written, naming it and why.
    """
    # a dangling link above it ('runs -> an unmounted scratch') made makedirs say 'File exists'
    if (problem := folder_problem(directory)) is not None:
        raise PserverStartError(f"--checkpoint-dir {directory}: cannot make it: {problem}")
    if (unwritable := folder_write_problem(directory)) is not None:  # as the launcher's --out
        to_make = "cannot make it: " if unwritable.to_make else ""
        raise PserverStartError(f"--checkpoint-dir {directory}: {to_make}{unwritable.cause}")


def _start_service(args: argparse.Namespace):
    """The shard's probes, when ``--health-port`` asks for them (prints the bound port)."""
    if args.health_port is None:
        return None
    from distconv.endpoint import join_endpoint
    from distconv.service import ServiceEndpoints

    stall = args.stall_seconds or STALL_SECONDS
    host = args.health_host or PROBE_HOST
    # a worker's series, never set here, read as a shard moving nothing: its stats stand there
    service = ServiceEndpoints(
        role="server", rank=args.shard, stall_seconds=stall, worker_series=False
    )
    port = service.start(host, args.health_port)
    # stderr: stdout's first line is "listening on HOST:PORT", which callers read
    where = join_endpoint(host.strip("[]"), port)  # [::1]:8080, as URLs write it
    print(f"pserver shard {args.shard} probes on {where}", file=sys.stderr)
    return service


def add_keys(subparsers: argparse._SubParsersAction) -> None:
    """``distconv keys DIR --workers N``."""
    p = subparsers.add_parser(
        "keys",
        help="make a parameter-server job's CURVE key files",
        description="Write server.key(_secret) and worker-R.key(_secret) for R < N into DIR.",
    )
    p.add_argument(
        "dir", type=folder, help="directory to write (created; existing keys are never replaced)"
    )
    p.add_argument("--workers", type=integer, required=True, help="workers in the job")
    add_verbosity(p)
    p.set_defaults(handler=run_keys)


def run_keys(args: argparse.Namespace) -> int:
    """Write the key files and list them."""
    from distconv.sync.ps.keys import make_keys

    try:
        files = make_keys(args.dir, args.workers)
    except ValueError as exc:  # keys already there, --workers 0: one line, as every CLI error
        sys.stderr.write(f"distconv keys: error: {exc}\n")
        return 1
    except OSError as exc:  # a full or read-only disk: which file, and why (none is left)
        where = exc.filename if exc.filename is not None else args.dir
        sys.stderr.write(f"distconv keys: error: cannot write {where}: {describe_os_error(exc)}\n")
        return 1
    print(f"wrote {len(files)} key files to {args.dir}")
    return 0
