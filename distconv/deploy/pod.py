"""The pod and container pieces every workload of a job shares.

Labels and metadata, the pod's and container's security context (a numeric non-root user, a
read-only root file system, no capabilities), CPU and memory requests and limits, the
environment a training process reads, the ``/readyz`` and ``/healthz`` probes, and the volumes
and mounts (``/tmp``, the run directory, the CURVE keys). The workloads build on
:class:`_JobBase`: :mod:`distconv.deploy.pserver` and :mod:`distconv.deploy.mpijob`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from distconv import __version__
from distconv.deploy import startup_window
from distconv.deploy.startup_window import STARTUP_PERIOD
from distconv.deploy.startup_window import STARTUP_SECONDS as STARTUP_SECONDS  # render's

Manifest = dict[str, Any]

#: the image's user and group (docker/Dockerfile); numeric, so runAsNonRoot can verify it
USER_ID = 10001
HOME = "/home/distconv"
#: the training processes get --health-port HEALTH_PORT
HEALTH_PORT = 8080
#: where the CURVE key Secrets are mounted (DISTCONV_KEYS points here)
KEYS_DIR = "/etc/distconv/keys"
#: the workers' working directory: run output (checkpoints, metrics) of the relative --out
WORK_DIR = "/var/lib/distconv/run"
#: SIGTERM -> checkpoint -> exit must fit in here before SIGKILL
GRACE_SECONDS = 120

WORKER_RESOURCES = {"cpu": "2", "memory": "4Gi"}

#: a restarted container resumes from the run directory's last checkpoint, or starts afresh
RESUME_ARGS = ("--resume", "auto")
#: every interface of a pod: IPv4 ones, or with ``ipv6`` both families' (dual-stack)
ANY_ADDRESS = {False: "0.0.0.0", True: "::"}
#: a shard's startup probe on /healthz may wait this long for the shard to serve its probes
SHARD_STARTUP_SECONDS = 60
#: where a GPU rank's CuPy caches the kernels it compiles on first use: on the /tmp emptyDir,
#: since CuPy's default (~/.cupy/kernel_cache) lies on the read-only root
CUPY_CACHE_DIR = "/tmp/cupy/kernel_cache"


class _JobBase:
    """The pieces every object of one job shares; the workload mixins add one method per
    object."""

    def __init__(
        self,
        name,
        workers,
        servers,
        image,
        gpus,
        train_args,
        mode,
        slots,
        ipv6=False,
        max_staleness=None,
    ) -> None:
        self.name = name
        self.workers = workers
        self.servers = servers
        self.image = image
        self.gpus = gpus
        self.train_args = train_args
        self.mode = mode
        self.slots = slots
        self.pserver = f"{name}-pserver"
        #: what the pods' servers listen on; the pod's address may be of either family
        self.any_address = ANY_ADDRESS[bool(ipv6)]
        #: the async shards' --max-staleness; None leaves them their default
        self.max_staleness: int | None = max_staleness

    def health_args(self) -> list[str]:
        """The probes on every interface: the kubelet calls the pod's address, not loopback."""
        return ["--health-port", str(HEALTH_PORT), "--health-host", self.any_address]

    # -- shared pieces --------------------------------------------------------------------------

    def selector(self, component: str) -> dict[str, str]:
        """The labels that pick this job's pods of one component."""
        return {
            "app.kubernetes.io/name": "distconv",
            "app.kubernetes.io/instance": self.name,
            "app.kubernetes.io/component": component,
        }

    def labels(self, component: str) -> dict[str, str]:
        """The standard recommended labels of every object and pod."""
        return {
            **self.selector(component),
            "app.kubernetes.io/part-of": "distconv",
            "app.kubernetes.io/version": __version__,
            "app.kubernetes.io/managed-by": "distconv-launch",
        }

    def metadata(self, name: str, component: str) -> Manifest:
        return {"name": name, "labels": self.labels(component)}

    def pod_spec(self, container: Manifest, volumes: list[Manifest], **extra: Any) -> Manifest:
        """A pod running ``container`` as the image's non-root user."""
        return {
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": USER_ID,
                "runAsGroup": USER_ID,
                "fsGroup": USER_ID,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "terminationGracePeriodSeconds": GRACE_SECONDS,
            **extra,
            "containers": [container],
            "volumes": volumes,
        }

    def container(
        self,
        name: str,
        args: list[str],
        resources: dict[str, str],
        *,
        env: list[Manifest],
        mounts: list[Manifest],
        ports: list[Manifest],
        gpus: int = 0,
        probed: bool = True,
        shard: bool = False,
    ) -> Manifest:
        """A container of the image; only ``args`` is set, so tini stays the entry point.
        ``probed`` gives it the probes of a rank, or with ``shard`` those of a shard."""
        limits: dict[str, Any] = dict(resources)
        if gpus:
            limits["nvidia.com/gpu"] = gpus
        else:
            # the CUDA image (NVIDIA's base) sets NVIDIA_VISIBLE_DEVICES=all, which the NVIDIA
            # container runtime honours for a container the device plugin gave no GPU: a shard,
            # the MPI launcher, or any container of a CPU job run from that image on a GPU node
            # would see, and could use, every GPU of its node, the ranks' too
            # (NVIDIA/k8s-device-plugin#61); "void" makes the runtime add none, whatever image
            env = [*env, _env("NVIDIA_VISIBLE_DEVICES", "void")]
        spec: Manifest = {
            "name": name,
            "image": self.image,
            "imagePullPolicy": "IfNotPresent",
            "args": args,
            **({"env": env} if env else {}),
            **({"ports": ports} if ports else {}),
            "resources": {"requests": dict(resources), "limits": limits},
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "capabilities": {"drop": ["ALL"]},
            },
            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, *mounts],
        }
        if probed:
            spec.update(_probes(shard, self.startup_seconds()))
        return spec

    def startup_seconds(self) -> int:
        """How long a rank's startup probe holds liveness off beside the shards, which take
        the workers' ``--timeout`` as written, or keep their default without one
        (:func:`~distconv.deploy.startup_window.startup_seconds`). No shard floor applies: the
        renderer refuses a ``--timeout`` below a shard's least before it builds a pod of a job
        with shards, and an MPIJob's pods have no startup probe."""
        from distconv.shard_timeout import workers_timeout
        from distconv.sync.ps.config import ShardConfig

        timeout = workers_timeout(self.train_args)
        return startup_window.startup_seconds(ShardConfig.timeout if timeout is None else timeout)

    def rank_env(
        self, role: str, world_size: int | None, threads: int, gpu: bool
    ) -> list[Manifest]:
        """What a training process needs to know about itself, besides its rank."""
        env = [_env("DISTCONV_ROLE", role), _env("DISTCONV_JOB_ID", self.name)]
        if world_size is not None:
            env.append(_env("DISTCONV_WORLD_SIZE", str(world_size)))
        env += _library_env(threads)
        env.append(_env("DISTCONV_NUM_THREADS", str(threads)))
        # always named: the CUDA image sets DISTCONV_DEVICE=gpu, which a CPU job's ranks would
        # inherit, and fail at start where the node has no GPU
        env.append(_env("DISTCONV_DEVICE", "gpu" if gpu else "cpu"))
        if gpu:
            # CuPy compiles each kernel (every elementwise op) on first use and writes it to its
            # cache directory: under the read-only $HOME, the first op would fail
            env.append(_env("CUPY_CACHE_DIR", CUPY_CACHE_DIR))
        return env

    def train_argv(self) -> list[str]:
        """The user's train arguments, resuming on a restart, writing onto the run volume."""
        out = [] if _has_flag(self.train_args, "--out") else ["--out", f"{WORK_DIR}/train"]
        return [*RESUME_ARGS, *out, *self.train_args]


def _probes(shard: bool, startup_seconds: int) -> Manifest:
    """Readiness on /readyz, liveness on /healthz; the startup probe holds liveness off while
    a rank waits for its peers (or, under MPI, for mpirun to start it) for ``startup_seconds``,
    a shard only until it serves its probes."""

    def probe(path: str, period: int, failures: int) -> Manifest:
        return {
            "httpGet": {"path": path, "port": "health"},
            "periodSeconds": period,
            "failureThreshold": failures,
            "timeoutSeconds": 5,
        }

    if shard:
        # /healthz, not /readyz: a shard whose job fails before worker 0 seeds it (a rank that
        # failed in its setup; not a worker pod later than --timeout, which the waiting ranks
        # are told of, the job not failed) keeps /readyz at 503 for good, so a startup probe on it
        # would hold liveness off for its whole window and the failed shard would refuse every
        # worker until the Job ran out of retries. A shard's /healthz is 200 while its loop
        # turns, seeded or not, and 503 once its job failed: liveness then restarts it.
        startup = probe("/healthz", 5, SHARD_STARTUP_SECONDS // 5)
    else:
        # /readyz, not /healthz: a rank's /healthz is 200 before the first beat, so a startup
        # probe on it would pass at once; liveness starts once the rank has its parameters (a
        # rank that fails before then exits, and its container restarts)
        startup = probe("/readyz", STARTUP_PERIOD, startup_seconds // STARTUP_PERIOD)
    return {
        "startupProbe": startup,
        "readinessProbe": probe("/readyz", 5, 3),
        "livenessProbe": probe("/healthz", 30, 3),
    }


def _library_env(threads: int) -> list[Manifest]:
    """What the libraries a process loads read (not distconv): a writable matplotlib config
    directory, and BLAS pools of ``threads`` threads."""
    # matplotlib and friends want a writable config directory; the root fs is read-only
    env = [_env("MPLCONFIGDIR", "/tmp/matplotlib")]
    # one BLAS pool per process, sized to its share of the CPU limit: nothing oversubscribes
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.append(_env(name, str(threads)))
    return env


def _env(name: str, value: str) -> Manifest:
    return {"name": name, "value": value}


def _port(name: str, number: int) -> Manifest:
    return {"name": name, "containerPort": number, "protocol": "TCP"}


def _keys_mount() -> Manifest:
    return {"name": "keys", "mountPath": KEYS_DIR, "readOnly": True}


def _tmp_volume() -> Manifest:
    return {"name": "tmp", "emptyDir": {}}


def _work_volume() -> Manifest:
    """The run directory (checkpoints, metrics); an emptyDir survives container restarts in
    the pod, not the pod: use a PersistentVolumeClaim to keep runs across pods."""
    return {"name": "work", "emptyDir": {}}


def _work_mount() -> Manifest:
    return {"name": "work", "mountPath": WORK_DIR}


def _has_flag(argv: Sequence[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def _quantity(text: str) -> tuple[Decimal, str]:
    """A Kubernetes quantity ("2", "1.5", "500m", "4Gi") as its number and its suffix."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([a-zA-Z]*)", text)
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    return Decimal(match.group(1)), match.group(2)


def _times(quantity: str, n: int) -> str:
    """A Kubernetes quantity ("2", "1500m", "1.5Gi") times ``n``, in the same unit."""
    number, suffix = _quantity(quantity)
    return f"{format((number * n).normalize(), 'f')}{suffix}"


def _cpus(resources: dict[str, str]) -> int:
    """Whole CPUs (at least one) in a container's CPU quantity ("2", "1.5", "500m")."""
    number, suffix = _quantity(resources["cpu"])
    return max(1, int(number / 1000 if suffix == "m" else number))
