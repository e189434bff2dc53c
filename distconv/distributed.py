"""The public entry point for user programs: who am I, and which sync strategy serves me.

A script written against this module runs unchanged in one process, under ``mpiexec`` and
under ``distconv-launch``::

    import distconv.distributed as dist
    from distconv.trainer import Trainer

    sync = dist.init("adam", lr=1e-3)          # runtime from flags/environment, then the sync
    try:
        trainer = Trainer(my_network, sync, batch_size=32)
        trainer.fit({"x": inputs, "target": targets}, epochs=5)
    finally:
        sync.close()

``init`` picks the transport from the runtime when not told: a parameter server when servers
are listed (``DISTCONV_PSERVERS``), MPI when ``mpiexec`` started the process with more than one
rank, and a single local process otherwise.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np

from distconv import stop_request
from distconv.allocator import keep_freed_memory
from distconv.kernels.conv_layout import autotune_enabled
from distconv.kernels.parallel import num_threads
from distconv.launch_env import stop_with_launcher
from distconv.logs import as_log_line, configure_logging, error_line, writes_json
from distconv.messages import debugging, say
from distconv.optim import OPTIMIZERS, Optimizer, create_optimizer
from distconv.runtime import Runtime, RuntimeConfigError, detect_runtime
from distconv.stop_request import Preempted
from distconv.sync import SyncStrategy, create_sync
from distconv.sync.mpi.leaving import abort_uninitialised
from distconv.sync.peers import PEER_FAILED_STATUS, peer_failure

log = logging.getLogger("distconv.distributed")
_Result = TypeVar("_Result")

#: runtime sources that mean "an MPI launcher started me"
_MPI_SOURCES = ("openmpi", "pmi")
#: the format the last :func:`init` asked for: :func:`run_main`'s line for an error before it
_log_format: str | None = None
#: set to 1 by ``distconv-launch local --insecure``: its shards run without CURVE, and a script
#: has no ``--insecure`` flag to be told so (``distconv train`` gets the flag)
ENV_INSECURE = "DISTCONV_INSECURE"


def init(
    optimizer: Optimizer | str = "sgd",
    *,
    sync: str | None = None,
    flags: Mapping[str, Any] | None = None,
    log_format: str | None = "text",
    sync_options: Mapping[str, Any] | None = None,
    **hyperparameters: float,
) -> SyncStrategy:
    """Detect the runtime, set up rank-stamped logging, and build the sync strategy.

    It also has the allocator keep freed memory for the next step
    (:func:`distconv.allocator.keep_freed_memory`; ``DISTCONV_KEEP_MEMORY=0`` leaves it alone),
    and reads the kernels' settings (:func:`check_kernel_settings`) before it connects.

    Args:
        optimizer: an optimizer, or the name of one built with ``hyperparameters``.
        sync: ``"local"``, ``"pserver"`` or ``"mpi"``; None chooses from the runtime.
        flags: explicit runtime settings (``rank``, ``world_size``, ``pservers``, ...), which
            override the environment.
        log_format: ``"text"`` or ``"json"``; None leaves logging alone.
        sync_options: the transport's own settings (:data:`TRANSPORT_OPTIONS`: ``timeout``,
            ``insecure``, ``push_bytes`` for pserver; ``bucket_bytes``, ``grad_dtype``,
            ``overlap``, ``timeout`` for mpi); another transport's settings are ignored, and
            one that no transport takes, or an on/off setting that is not a bool, is refused.
            Without ``insecure``, ``DISTCONV_INSECURE=1`` (``distconv-launch local
            --insecure``) stands for ``insecure=True`` to a parameter server, unless ``flags``
            give keys.
            ``insecure`` beside ``DISTCONV_KEYS`` drops the keys, and says so.
        **hyperparameters: for an optimizer given by name (``lr=0.01``); refused beside an
            optimizer built already.

    Returns:
        The strategy; its ``rank``, ``world_size`` and ``is_chief`` say who this process is.
        Under MPI, close it only after it trained (its ``setup`` ran): closing one untrained
        aborts the job, since the other ranks may be waiting for this one in that setup.

    Raises:
        RuntimeConfigError: the environment is inconsistent or a setting in it malformed, or
            the transport's rank and world size disagree with it.
        ValueError: a ``sync_options`` key no transport takes, or a bad value.
        TypeError: ``optimizer`` is neither an optimizer nor the name of one,
            ``hyperparameters`` beside an optimizer (built already: they would be dropped), or
            ``flags`` or ``sync_options`` not a mapping.
    """
    global _log_format
    _check_arguments(optimizer, hyperparameters, flags=flags, sync_options=sync_options)
    _log_format = log_format  # run_main's line for an error before the log is set up heeds it
    runtime = detect_runtime(flags)
    start_training_process()
    if log_format is not None:
        configure_logging(runtime, fmt=log_format)
    if isinstance(optimizer, str):
        optimizer = create_optimizer(optimizer, **hyperparameters)
    kind = sync or choose_transport(runtime)
    return build_sync(kind, optimizer, runtime, dict(sync_options or {}))


def _check_arguments(optimizer: Any, hyperparameters: Mapping[str, Any], **mappings: Any) -> None:
    """Refuse what :func:`init` would fail on later, or drop, before anything is read or
    connected: an ``optimizer`` neither one nor a name (None built a sync that failed at
    setup), ``hyperparameters`` beside a built one (dropped without a word), and ``flags`` or
    ``sync_options`` that are not mappings (``'str' object has no attribute 'items'``)."""
    if not isinstance(optimizer, Optimizer | str):
        raise TypeError(
            f"init: optimizer must be an Optimizer or the name of one ({', '.join(OPTIMIZERS)}), "
            f"got {type(optimizer).__name__} {optimizer!r:.60}"
        )
    if hyperparameters and not isinstance(optimizer, str):
        raise TypeError(
            f"init: hyperparameters {sorted(hyperparameters)} are for an optimizer given by "
            f"name; {type(optimizer).__name__} is built already with {optimizer.config()}: "
            "set them where it is made, or pass its name"
        )
    for name, value in mappings.items():
        if value is not None and not isinstance(value, Mapping):
            raise TypeError(
                f"init: {name} must be a mapping (a dict: {{'rank': 1}}), got "
                f"{type(value).__name__} {value!r:.60}"
            )


def run_main(main: Callable[[], _Result]) -> _Result:
    """Run a training script's ``main()`` and return what it returns (a ``main`` that returns
    an exit status keeps it: ``sys.exit(run_main(main))``), ending as ``distconv train`` does.

    Another rank's failure (:class:`~distconv.sync.peers.PeerFailed`, its traceback printed)
    exits 75 (``PEER_FAILED_STATUS``), not 1: ``distconv-launch`` reports the rank that failed.

    A stop by SIGTERM or Ctrl-C (the Trainer's :class:`~distconv.stop_request.Preempted`, after
    its checkpoint) ends it as ``distconv train``: one line and exit 143 or 130, not a traceback
    and 1 (a failure to a launcher); a sync ``main`` closes meanwhile leaves as after a finished
    run (under MPI it aborted). A Ctrl-C during setup, or a second one: ``interrupted`` and 130
    (``DISTCONV_DEBUG=1`` prints the traceback).

    A :class:`~distconv.runtime.RuntimeConfigError` (``RANK=x``) is ``script.py: error: ...``
    and exit 1 as well (its traceback under ``DISTCONV_DEBUG=1``, or an MPI sync's abort hook);
    a rank failing before it initialised MPI aborts the MPI job. Lines are JSON under a JSON log
    (a peer failure's traceback under ``"exception"``). Any other exception propagates.
    """
    ends_run, stop_request.preempted_ends_run = stop_request.preempted_ends_run, True
    try:
        return main()
    except Preempted as exc:
        say(as_log_line(f"{_program()}: {exc}", logging.WARNING))  # JSON as the log may be
        raise SystemExit(exc.exit_status) from None
    except KeyboardInterrupt:  # before the Trainer takes Ctrl-C (setup), or the second one
        if debugging():
            traceback.print_exc()
        say(as_log_line(f"{_program()}: interrupted", logging.WARNING))
        raise SystemExit(130) from None
    except Exception as exc:
        status = _failure_status(exc)
        _abort_mpi_before_init(status)
        if status is None:
            raise
        raise SystemExit(status) from None
    finally:
        stop_request.preempted_ends_run = ends_run


def _failure_status(error: Exception) -> int | None:
    """Say why ``error`` ends the script and return its exit status, as ``distconv train``
    does: :data:`~distconv.sync.peers.PEER_FAILED_STATUS` for another rank's failure (with
    the traceback), 1 for a malformed environment (one line); None for anything else (a bug's
    traceback, which propagates), and for an error an exception hook takes."""
    if peer_failure(error) is not None:
        if writes_json(_log_format):  # the traceback in the line: every line JSON there
            trace = "".join(traceback.format_exception(error)).rstrip()
            say(error_line(_program(), error, _log_format, exception=trace))
        else:
            traceback.print_exc()
        return PEER_FAILED_STATUS
    # another exception hook wants it uncaught: an MPI job's (MPISync's) aborts every rank,
    # where a SystemExit skipped it and left the others waiting in a collective for this one
    hooked = sys.excepthook is not sys.__excepthook__
    if isinstance(error, RuntimeConfigError) and not hooked and not debugging():
        say(error_line(_program(), error, _log_format))
        return 1
    return None


def _abort_mpi_before_init(status: int | None) -> None:
    """Abort the MPI job from a rank failing before ``MPI_Init``, as ``distconv train`` does:
    Hydra left the others waiting there for ever (after a pserver's peer failure none wait)."""
    mpi_job = mpi_launcher_size() > 1 and not os.environ.get("DISTCONV_PSERVERS")
    if mpi_job and status != PEER_FAILED_STATUS:
        if status is None and "mpi4py.MPI" not in sys.modules:
            traceback.print_exc()  # a bug's, before the abort ends this process
        abort_uninitialised(status or 1)  # returns where MPI is initialised already


def _program() -> str:
    """The script's name, as its stop line starts (``distconv train`` says its own)."""
    return os.path.basename(sys.argv[0]) or "python"


def _insecure_from_env(runtime: Runtime) -> bool:
    """What ``DISTCONV_INSECURE=1`` means beside the runtime's keys: no CURVE without keys;
    keys from a flag win (a flag beats a variable); ``DISTCONV_KEYS`` beside it is an error,
    as two variables that disagree are (which one is right?)."""
    if runtime.keys_dir is None:
        return True
    if runtime.keys_from_env:
        raise RuntimeConfigError(
            f"both DISTCONV_KEYS ({runtime.keys_dir!r}) and {ENV_INSECURE}=1 are set: unset one"
        )
    return False


def start_training_process() -> None:
    """What a training process does first: keep freed memory mapped (each step reuses the
    last one's), read the kernels' environment settings before anything is written or
    connected (the kernels read them at the first step, where a bad one stopped training
    with a traceback), and follow a launcher that started it through a script
    (:func:`~distconv.launch_env.stop_with_launcher`).

    Raises:
        RuntimeConfigError: ``DISTCONV_NUM_THREADS`` or ``DISTCONV_AUTOTUNE`` is malformed.
    """
    keep_freed_memory()
    try:
        num_threads()
        autotune_enabled()
    except ValueError as exc:
        raise RuntimeConfigError(str(exc)) from None
    stop_with_launcher()


def mpi_launcher_size(environ: Mapping[str, str] | None = None) -> int:
    """The world size an MPI launcher (MPICH's or Open MPI's) gave this process, read from its
    size variable alone (as :mod:`distconv.runtime` reads them); 1 where there is none or it is
    not a number. Never raises: it is read on the way out of a process that has already failed."""
    env = os.environ if environ is None else environ
    for size_var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        if size_var in env:
            try:
                return int(env[size_var].strip())
            except ValueError:
                return 1
    return 1


def choose_transport(runtime: Runtime) -> str:
    """The transport a runtime implies: pserver with servers, mpi under mpiexec, else local.

    Under mpiexec is where an MPI launcher's variables gave the rank, or say this process is
    one of several ranks beside flags that gave it (``--world-size 2``, which chose local
    sync, whose refusal then told the user to pick mpi)."""
    if runtime.pservers:
        return "pserver"
    under_mpi = runtime.source in _MPI_SOURCES or mpi_launcher_size() > 1
    if runtime.world_size > 1 and under_mpi:
        return "mpi"
    return "local"


#: the settings each transport takes; the others are dropped when it is chosen
TRANSPORT_OPTIONS = {
    "local": (),
    "pserver": ("timeout", "insecure", "push_bytes"),
    "mpi": ("bucket_bytes", "grad_dtype", "overlap", "timeout"),
}


#: the settings that switch something on or off: a string such as "no" would read as True
FLAG_OPTIONS = {"insecure": (False, True), "overlap": (None, False, True)}


def _check_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Refuse a setting no transport takes (a typo would leave the default silently) and an
    on/off setting that is not a bool (``insecure="no"`` would turn CURVE off); a numpy bool
    (a setting read through numpy) is one, and comes back as Python's."""
    known = sorted({k for taken in TRANSPORT_OPTIONS.values() for k in taken})
    checked = {}
    for key, value in options.items():
        if key not in known:
            raise ValueError(f"sync_options: no transport takes {key!r}; they take {known}")
        allowed = FLAG_OPTIONS.get(key)
        if allowed is not None and isinstance(value, np.bool_):
            value = bool(value)
        if allowed is not None and not any(value is a for a in allowed):
            raise ValueError(f"sync_options: {key} must be one of {allowed}, got {value!r}")
        checked[key] = value
    return checked


def build_sync(
    kind: str, optimizer: Optimizer, runtime: Runtime, options: Mapping[str, Any]
) -> SyncStrategy:
    """The strategy ``kind`` for this runtime; checks that the two agree on rank and size.

    ``options`` may hold settings of every transport (a command line offers them all); the
    chosen one takes its own (:data:`TRANSPORT_OPTIONS`) and the rest are dropped.
    """
    if "sparse" in options:  # a ctor argument once; silently dense traffic would be a surprise
        raise ValueError(
            "sparse tables are marked in the model now: TableProjection(..., sparse=True) or "
            "SelectiveFullyConnected(..., sparse=True), not a sync option"
        )
    options = _check_options(options)
    options = {k: v for k, v in options.items() if k in TRANSPORT_OPTIONS.get(kind, options)}
    if kind == "local":
        if runtime.world_size > 1:  # distconv train refuses it first, in its own words
            raise RuntimeConfigError(
                f"this process is rank {runtime.rank} of {runtime.world_size} ({runtime.source})"
                ", but local sync trains alone; use sync='pserver' or 'mpi' (--sync pserver or mpi "
                "to distconv train), or leave sync out and init() picks it, with parameter servers "
                "(distconv-launch local --servers 1 or more) or under MPI (distconv-launch mpi)"
            )
        if mpi_launcher_size() > 1:  # --rank 0 --world-size 1: ranks beside it would hang
            raise RuntimeConfigError(
                f"an MPI launcher started this process as one of {mpi_launcher_size()} ranks, "
                "but local sync trains alone (ranks beside it would wait for it for ever); use "
                "the mpi sync (--sync mpi, sync='mpi'), or start it without mpiexec"
            )
        return create_sync("local", optimizer=optimizer)
    if kind == "pserver":
        if not runtime.pservers:
            raise RuntimeConfigError(
                "--sync pserver needs the servers: --pservers HOST:PORT,... or DISTCONV_PSERVERS"
            )
        # the shards beside it run so (a script's init() or a distconv train a wrapper started
        # has no --insecure); keys and insecure mean nothing to another transport, whose run
        # both variables left in a shell must not stop
        if os.environ.get(ENV_INSECURE) == "1" and options.get("insecure") is None:
            options = {**options, "insecure": _insecure_from_env(runtime)}
        if not runtime.keys_dir and not options.get("insecure"):
            # the client refuses this too, with a ValueError: a traceback for a missing flag
            raise RuntimeConfigError(
                "--sync pserver needs the job's CURVE keys: --keys DIR (or DISTCONV_KEYS), or "
                "--insecure (sync_options={'insecure': True} from a script)"
            )
        keys_dir = runtime.keys_dir
        if keys_dir and options.get("insecure"):  # the client would drop the keys unsaid
            if not runtime.keys_from_env:
                raise RuntimeConfigError(
                    f"--sync pserver got both --keys {keys_dir!r} and insecure (--insecure or "
                    "sync_options): pick one"
                )
            log.warning("insecure overrides DISTCONV_KEYS=%r: training without CURVE", keys_dir)
            keys_dir = None
        from distconv.sync.ps.keys import KeyFileError  # zmq: only for a parameter server

        try:
            return create_sync(
                "pserver",
                optimizer=optimizer,
                rank=runtime.rank,
                world_size=runtime.world_size,
                pservers=list(runtime.pservers),
                keys_dir=keys_dir,
                job_id=runtime.job_id,
                **options,
            )
        except KeyFileError as exc:  # names the file: one line, not the client's traceback
            raise RuntimeConfigError(str(exc)) from None
    if kind == "mpi":
        strategy = create_sync("mpi", optimizer=optimizer, **options)
        if runtime.source != "default" and (
            (strategy.rank, strategy.world_size) != (runtime.rank, runtime.world_size)
        ):
            # the environment's error, as init() documents (it names both sources): a caller's
            # except RuntimeConfigError missed it. Closed while it propagates: other ranks may
            # wait in setup, so it aborts
            try:
                raise RuntimeConfigError(_mpi_disagrees(strategy, runtime))
            finally:
                strategy.close()
        return strategy
    return create_sync(kind, optimizer=optimizer, **options)


def _mpi_disagrees(strategy: Any, runtime: Runtime) -> str:
    """Why the MPI sync's rank and size are not the environment's. Without mpi4py (or its MPI
    library) the sync stands in for one process: "MPI says rank 0 of 1" sent the reader after
    the launcher, where ``pip install 'distconv[mpi]'`` was the answer."""
    env = f"the environment ({runtime.source}) says rank {runtime.rank} of {runtime.world_size}"
    if strategy.mpi is None:
        from distconv.sync.mpi.comm import mpi4py_missing

        return mpi4py_missing(env)
    return f"MPI says rank {strategy.rank} of {strategy.world_size}, but {env}"
