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
rank, and a single local process otherwise. A strategy of one's own is made by what ``sync``
names, from the optimizer: ``dist.init("sgd", lr=0.1, sync=lambda opt: MySync(opt, 1.0))``.

``run_main(main)`` (:mod:`distconv.script_main`, given here too) ends such a script as
``distconv train`` ends: a user's error (a malformed environment, ranks that run different
jobs: :class:`~distconv.sync.errors.JobRefused`) in one line and exit 1.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from distconv.allocator import keep_freed_memory
from distconv.kernels.conv_layout import autotune_enabled
from distconv.kernels.parallel import num_threads
from distconv.launch_env import stop_with_launcher
from distconv.logs import configure_logging
from distconv.optim import OPTIMIZERS, Optimizer, create_optimizer
from distconv.own_strategy import SyncFactory, build_own_sync, named
from distconv.runtime import Runtime, RuntimeConfigError, detect_runtime
from distconv.script_main import mpi_launcher_size, note_log_format
from distconv.script_main import run_main as run_main  # dist.run_main(main), as it always was
from distconv.sync import SyncStrategy, create_sync

log = logging.getLogger("distconv.distributed")

#: runtime sources that mean "an MPI launcher started me"
_MPI_SOURCES = ("openmpi", "pmi")
#: set to 1 by ``distconv-launch local --insecure``: its shards run without CURVE, and a script
#: has no ``--insecure`` flag to be told so (``distconv train`` gets the flag)
ENV_INSECURE = "DISTCONV_INSECURE"


def init(
    optimizer: Optimizer | str = "sgd",
    *,
    sync: str | SyncFactory | None = None,
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
        sync: ``"local"``, ``"pserver"`` or ``"mpi"``; None chooses from the runtime; or a
            callable that makes a strategy of one's own from the optimizer (its class, or
            ``lambda opt: MySync(opt, max_norm)``), called once everything before a transport
            is built has run (the checks, the runtime, logging, the kernels' settings). What
            it returns must be a :class:`SyncStrategy` whose rank and world size are the
            runtime's, where flags or the environment give them (as for ``"mpi"``): one of
            world size 1 under an MPI launcher of several ranks is refused too, and a
            strategy refused is closed first.
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
            ``insecure`` beside ``DISTCONV_KEYS`` drops the keys, and says so. Refused beside
            a callable ``sync``, which makes its strategy with its own settings.
        **hyperparameters: for an optimizer given by name (``lr=0.01``); refused beside an
            optimizer built already.

    Returns:
        The strategy; its ``rank``, ``world_size`` and ``is_chief`` say who this process is.
        Under MPI, close it only after it trained (its ``setup`` ran): closing one untrained
        aborts the job, since the other ranks may be waiting for this one in that setup.

    Raises:
        RuntimeConfigError: the environment is inconsistent or a setting in it malformed, or
            the rank and world size of the transport (or of the strategy ``sync`` makes)
            disagree with it.
        ValueError: a ``sync_options`` key no transport takes, or a bad value.
        TypeError: ``optimizer`` is neither an optimizer nor the name of one,
            ``hyperparameters`` beside an optimizer (built already: they would be dropped),
            ``flags`` or ``sync_options`` not a mapping, ``sync`` neither a name nor a
            callable (or a strategy made already), ``sync_options`` beside a callable, or a
            callable that returns no :class:`SyncStrategy` (or one whose base ``__init__``
            never ran).
    """
    _check_arguments(optimizer, hyperparameters, flags=flags, sync_options=sync_options)
    _check_sync(sync, sync_options)
    note_log_format(log_format)  # run_main's line for an error before the log is set up heeds it
    runtime = detect_runtime(flags)
    start_training_process()
    if log_format is not None:
        configure_logging(runtime, fmt=log_format)
    if isinstance(optimizer, str):
        optimizer = create_optimizer(optimizer, **hyperparameters)
    if callable(sync):
        return build_own_sync(sync, optimizer, runtime)
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


def _check_sync(sync: Any, sync_options: Mapping[str, Any] | None) -> None:
    """Refuse a ``sync`` that :func:`init` cannot use, before anything is read or connected,
    as :func:`_check_arguments` does: a strategy made already (callable, since it takes
    gradients: it would be handed the optimizer as one), what is neither a name nor a callable
    (an unknown transport, found only after connecting), and ``sync_options`` beside a
    callable, which makes its strategy with its own settings (they would be dropped)."""
    if isinstance(sync, SyncStrategy):
        name = type(sync).__name__
        raise TypeError(
            f"init: sync is a {name} made already: pass what makes one from the optimizer "
            f"(sync={name}, or sync=lambda opt: {name}(opt, ...))"
        )
    if not (sync is None or isinstance(sync, str) or callable(sync)):
        raise TypeError(
            f"init: sync must be a transport name ({', '.join(map(repr, TRANSPORT_OPTIONS))}) "
            "or a callable that makes a SyncStrategy from the optimizer, got "
            f"{type(sync).__name__} {sync!r:.60}"
        )
    if callable(sync) and sync_options:
        raise TypeError(
            f"init: sync_options {sorted(sync_options)} are for a transport given by name; "
            f"sync={named(sync)} makes a strategy with its own settings: give them to it "
            "(sync=lambda opt: MySync(opt, timeout=5))"
        )


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
    builder = _BUILDERS.get(kind)
    if builder is None:  # a registered strategy of the user's own: its options as given
        return create_sync(kind, optimizer=optimizer, **options)
    return builder(optimizer, runtime, options)


def _build_local(
    optimizer: Optimizer, runtime: Runtime, options: Mapping[str, Any]
) -> SyncStrategy:
    """Local sync, refused where this process is one of several: its peers would wait for it."""
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
    return create_sync("local", optimizer=optimizer, **options)


def _build_pserver(
    optimizer: Optimizer, runtime: Runtime, options: Mapping[str, Any]
) -> SyncStrategy:
    """The parameter-server client for this rank, with the job's keys or without CURVE."""
    if not runtime.pservers:
        raise RuntimeConfigError(
            "--sync pserver needs the servers: --pservers HOST:PORT,... or DISTCONV_PSERVERS"
        )
    keys_dir, options = _pserver_security(runtime, options)
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


def _pserver_security(
    runtime: Runtime, options: Mapping[str, Any]
) -> tuple[str | None, Mapping[str, Any]]:
    """The keys folder the client uses (``None``: without CURVE) and the options it gets:
    exactly one of keys and insecure, from flags, ``sync_options`` or the environment."""
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
    if runtime.keys_dir and options.get("insecure"):  # the client would drop the keys unsaid
        if not runtime.keys_from_env:
            raise RuntimeConfigError(
                f"--sync pserver got both --keys {runtime.keys_dir!r} and insecure (--insecure "
                "or sync_options): pick one"
            )
        log.warning("insecure overrides DISTCONV_KEYS=%r: training without CURVE", runtime.keys_dir)
        return None, options
    return runtime.keys_dir, options


def _build_mpi(optimizer: Optimizer, runtime: Runtime, options: Mapping[str, Any]) -> SyncStrategy:
    """The MPI sync, refused (and closed) where MPI's rank and size are not the environment's."""
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


#: the transports that check the runtime before they are built; any other name is built as is
_BUILDERS = {"local": _build_local, "pserver": _build_pserver, "mpi": _build_mpi}


def _mpi_disagrees(strategy: Any, runtime: Runtime) -> str:
    """Why the MPI sync's rank and size are not the environment's. Without mpi4py (or its MPI
    library) the sync stands in for one process: "MPI says rank 0 of 1" sent the reader after
    the launcher, where ``pip install 'distconv[mpi]'`` was the answer."""
    env = f"the environment ({runtime.source}) says rank {runtime.rank} of {runtime.world_size}"
    if strategy.mpi is None:
        from distconv.sync.mpi.comm import mpi4py_missing

        return mpi4py_missing(env)
    return f"MPI says rank {strategy.rank} of {strategy.world_size}, but {env}"
