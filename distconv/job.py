"""A whole training job from one :class:`TrainConfig`: data, model, sync, trainer.

This is what ``distconv train`` runs. It keeps job assembly out of the :class:`Trainer`, which
trains whatever network and sync strategy it is given.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from distconv.launch_env import launch_id, restart_count
from distconv.runtime import Runtime, detect_runtime

if TYPE_CHECKING:  # numpy, the trainer, prometheus_client: imported by train() when it runs
    from distconv.resume import Preempted
    from distconv.service import ServiceEndpoints
    from distconv.trainer import Trainer

log = logging.getLogger("distconv.job")

#: the log line that names the probes' port (docs/operations.md, Probes)
SERVING = "probes and metrics on port %d"


@dataclass
class TrainConfig:
    """Everything that defines a training run; the command line fills one in.

    The defaults train :func:`distconv.models.lenet` on the digits to 98-99.5 % test accuracy
    in about 15 seconds on two CPU cores. ``batch_size`` is per worker: the global batch is
    ``world_size * batch_size * accumulate``.
    """

    data: str = "digits"
    data_dir: str | None = None
    epochs: int = 20
    batch_size: int = 16
    accumulate: int = 1
    optimizer: str = "adam"
    lr: float | None = None  # None: the optimizer's default
    lr_decay: float = 0.9
    seed: int = 0
    dtype: str = "float32"
    out: str | None = None
    resume: bool | str = False  # False, True, "auto" or "overwrite"
    init_from: str | None = None  # a checkpoint whose weights a fresh start takes
    checkpoint_every: int = 0
    keep_checkpoints: int = 3
    progress: bool | None = None
    health_port: int | None = None  # serve /readyz, /healthz, /metrics (+ local rank)
    health_host: str = "127.0.0.1"  # the probes' interface; 0.0.0.0 for a kubelet
    stall_seconds: float = 300.0  # /healthz's limit without progress (a checkpoint is none)
    sync: str | None = None  # None: chosen from the runtime
    sync_options: dict[str, Any] = field(default_factory=dict)


def train(config: TrainConfig, runtime: Runtime | None = None) -> Trainer:
    """Load the data, build LeNet, the optimizer and the sync strategy, and train.

    The seed fixes the data split, the initial weights and the batch order, so two runs with the
    same config end with identical weights, whatever the world size.

    Raises:
        DataError: the data cannot be loaded.
        CheckpointError: resuming fails, or the output directory holds another run.
        RuntimeConfigError, SyncError: the ranks or transports do not fit together, or a
            setting in the environment is malformed.
        TrainingError: the loss diverged.
        Preempted: SIGTERM or Ctrl-C stopped it, after a checkpoint where one is written.
        ValueError: ``config.seed`` is not an int >= 0.
    """
    # imported here, not at the top: a command line that only declares `train`'s flags (every
    # `distconv` command, `--help`) reads TrainConfig's defaults and must not pay for numpy,
    # the layers and prometheus_client at each start
    from distconv.backend import is_gpu_array
    from distconv.data import load_dataset
    from distconv.distributed import build_sync, choose_transport, start_training_process
    from distconv.init import set_seed
    from distconv.init_from import InitFromCheckpoints
    from distconv.kernels.blas import kernels_forced, kernels_said
    from distconv.models import lenet
    from distconv.optim import create_optimizer
    from distconv.resume import JobStart
    from distconv.sampler import check_seed
    from distconv.sync.description import sync_scheme
    from distconv.trainer import Trainer

    # the split and set_seed draw from it before the Trainer's check: numpy's own message
    check_seed(config.seed)
    runtime = runtime or detect_runtime()
    start_training_process()
    train_set, test_set = load_dataset(config.data, config.data_dir, config.seed)
    optimizer = create_optimizer(
        config.optimizer, **({} if config.lr is None else {"lr": config.lr})
    )
    set_seed(config.seed)
    network = lenet(train_set.image_shape, train_set.num_classes)
    network.check_finite = False  # the Dataset checked its values once when it was loaded
    kind = config.sync or choose_transport(runtime)
    sync = monitor = None
    try:
        # under MPI the sync comes before the probes: building it runs MPI_Init, which waits
        # for every rank with the GIL held, so a port bound before it could not answer
        # /healthz while a peer was late (loading its data), and an MPIJob's liveness took
        # the waiting ranks for hung ones; a port not yet bound is a rank not yet running to
        # it. A port that cannot be bound then closes the sync untrained, which aborts the job
        if kind == "mpi":
            sync = build_sync(kind, optimizer, runtime, config.sync_options)
        monitor = _start_service(
            config.health_port, config.health_host, runtime, config.stall_seconds
        )
        if sync is None:
            sync = build_sync(kind, optimizer, runtime, config.sync_options)
        log.info(
            "training on %s: %d train, %d test examples; %s; %s, %d worker(s); config %s",
            config.data,
            len(train_set),
            len(test_set),
            optimizer,
            scheme_text(sync_scheme(sync)),
            sync.world_size,
            effective_config(config, optimizer.lr, kind),
        )
        # a CPU step's products may run slower than on this CPU's own kernels; a GPU's, on none
        if kernels_forced() and not is_gpu_array(network.parameters()[0].value):
            log.info("%s; kernels other than this CPU's own may be slower", kernels_said())
        trainer = Trainer(
            network,
            sync,
            config.batch_size,
            accumulate=config.accumulate,
            out_dir=config.out,
            seed=config.seed,
            lr_decay=config.lr_decay,
            checkpoint_every=config.checkpoint_every,
            keep_checkpoints=config.keep_checkpoints,
            dtype=config.dtype,
            progress=config.progress,
            config={"data": config.data, "model": "lenet", "epochs": config.epochs},
            monitor=monitor,
            start=JobStart(runtime.job_id, launch_id(), restart_count()),
            # a fresh start takes --init-from's weights; each checkpoint keeps where they came
            # from, also one resumed without --init-from
            checkpoints=partial(InitFromCheckpoints, source=config.init_from),
        )
        stopped = _fit(trainer, train_set, test_set, config)
    finally:
        if sync is not None:
            sync.close()
        if monitor is not None:
            monitor.close()
    if stopped is not None:
        raise stopped
    return trainer


def effective_config(config: TrainConfig, lr: float, sync: str) -> dict[str, Any]:
    """``config`` as the start line shows it: the learning rate the optimizer uses and the sync
    chosen, where the flags left them None (the optimizer's default, the runtime's choice)."""
    return {**asdict(config), "lr": lr, "sync": sync}


def scheme_text(scheme: dict[str, Any]) -> str:
    """A start line's words for :func:`~distconv.sync.description.sync_scheme`'s dict:
    ``mpi sync (grad_dtype bfloat16, bucket_bytes 262144)``. A parameter-server worker learns
    its mode from the shards at setup, after this line: it says so, not "sync" for a mode."""
    settings = {k: v for k, v in scheme.items() if k != "sync"}
    if scheme["sync"] == "pserver" and "mode" not in settings:
        return "pserver (mode and max_staleness: the shards', said at setup)"
    words = ", ".join(f"{k} {v}" for k, v in settings.items())
    return f"{scheme['sync']} sync" + f" ({words})" * bool(words)


def _fit(trainer: Trainer, train_set: Any, test_set: Any, config: TrainConfig) -> Preempted | None:
    """Train; a stop by signal is returned, not raised, so that the sync closes outside it.

    Every rank stops at the same agreed step, so none waits for another, and the job may end
    as cleanly as a finished one; an MPI sync closing while an exception propagates must assume
    the opposite, and aborts the job with a traceback that reads like a crash.
    """
    from distconv.resume import Preempted

    try:
        trainer.fit(train_set, test_set, config.epochs, resume=config.resume)
    except Preempted as exc:
        return exc
    return None


def _start_service(
    port: int | None, host: str, runtime: Runtime, stall_seconds: float = 300.0
) -> ServiceEndpoints | None:
    """Probes and metrics on ``host:port + local rank`` (several ranks may share a pod); a
    kubelet probes the pod's address, so pods pass ``host`` 0.0.0.0."""
    if port is None:
        return None
    from distconv.service import ServiceEndpoints  # prometheus_client, http.server: probes only

    service = ServiceEndpoints(role=runtime.role, rank=runtime.rank, stall_seconds=stall_seconds)
    service.set_restarts(restart_count())  # before the port is bound: a bad count leaks no server
    # the port this rank binds is not the one the user typed: an error about it says how
    shifted = port and runtime.local_rank
    port_from = f"--health-port {port} + local rank {runtime.local_rank}" if shifted else None
    bound = service.start(host, port + runtime.local_rank if port else 0, port_from=port_from)
    # said even under -q (warnings only): a port the kernel chose (0) is named nowhere else,
    # as a shard prints its own; through the log's handler, in its format (text or JSON)
    log.handle(log.makeRecord(log.name, logging.INFO, __file__, 0, SERVING, (bound,), None))
    return service
