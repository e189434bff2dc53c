"""Kubernetes manifests for one distconv job, as plain dicts.

Two shapes, chosen by the sync mode:

- **Parameter server** (``servers >= 1``): a headless Service and a StatefulSet for the shards
  (shard ``i`` is pod ``<job>-pserver-<i>``, reachable as ``<job>-pserver-<i>.<job>-pserver``),
  and an Indexed Job for the workers (rank = ``JOB_COMPLETION_INDEX``). The shards mount the
  Secret ``<job>-server-keys`` (the server's pair and every worker's public key), the workers
  ``<job>-worker-keys`` (the server's public key and the workers' pairs), both as files, so no
  worker ever holds the server's secret key and no shard a worker's. Both Secrets are made
  from ``distconv keys DIR`` by ``kubectl create secret generic`` (docs/kubernetes.md), so no
  key ever sits in a manifest, a repository or an environment variable. The pods of one
  Indexed Job share one template, so each worker pod holds every worker's secret key, not
  only its own; per-worker Secrets would need one Job per rank.
- **Allreduce** (``servers == 0``): a Kubeflow ``MPIJob`` (``kubeflow.org/v2beta1``) whose
  launcher runs ``mpirun -np <workers> python -m mpi4py -m distconv train --sync mpi ...`` and
  whose worker pods run ``sshd`` as the image's non-root user.

``workers`` always counts training ranks. Under MPI a pod holds ``slots_per_worker`` of them.

Every pod runs as a numeric non-root user with a read-only root file system, has CPU and memory
requests and limits (plus ``nvidia.com/gpu`` with ``gpus``), a grace period long enough to
checkpoint, and the ``app.kubernetes.io/*`` labels; every training container is probed on
``/readyz`` and ``/healthz`` (:mod:`distconv.service`). The MPI launcher runs no training code
and so has no probes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from distconv import __version__

Manifest = dict[str, Any]

#: the image's user and group (docker/Dockerfile); numeric, so runAsNonRoot can verify it
USER_ID = 10001
HOME = "/home/distconv"
#: ports inside the pods; the training processes get --health-port HEALTH_PORT
PS_PORT = 5555
HEALTH_PORT = 8080
SSH_PORT = 2222
#: where the CURVE key Secrets are mounted (DISTCONV_KEYS points here)
KEYS_DIR = "/etc/distconv/keys"
#: each shard's checkpoint parts (a PersistentVolumeClaim per shard)
CHECKPOINT_DIR = "/var/lib/distconv/checkpoints"
#: the workers' working directory: run output (checkpoints, metrics) of the relative --out
WORK_DIR = "/var/lib/distconv/run"
#: SIGTERM -> checkpoint -> exit must fit in here before SIGKILL
GRACE_SECONDS = 120
#: the shard's StatefulSet pods carry their ordinal in this label (Kubernetes >= 1.28)
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"

WORKER_RESOURCES = {"cpu": "2", "memory": "4Gi"}
SERVER_RESOURCES = {"cpu": "1", "memory": "2Gi"}
LAUNCHER_RESOURCES = {"cpu": "500m", "memory": "512Mi"}

_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
#: leaves room for "-pserver-NNNNN" inside the 63-character DNS label a pod's hostname is
MAX_JOB_NAME = 40
MODES = ("sync", "async")
#: flags the deployment sets itself; a second copy in train_args would silently win or clash
OWNED_FLAGS = (
    "--sync",
    "--pservers",
    "--keys",
    "--insecure",
    "--health-port",
    "--health-host",
    "--resume",
)
#: a restarted container resumes from the run directory's last checkpoint, or starts afresh
RESUME_ARGS = ("--resume", "auto")
#: probes must answer the kubelet, which calls the pod's address, not loopback
HEALTH_ARGS = ("--health-port", str(HEALTH_PORT), "--health-host", "0.0.0.0")
#: a startup probe on /readyz may wait this long (periods x failures) for peers and seeding
STARTUP_SECONDS = 1200


def render_manifests(
    *,
    job_name: str,
    workers: int,
    servers: int,
    image: str,
    gpus: int = 0,
    train_args: Sequence[str] = (),
    mode: str = "sync",
    slots_per_worker: int = 1,
    mpi: bool | None = None,
) -> list[Manifest]:
    """The manifests of one job, ready for ``kubectl apply`` (see :func:`dump_yaml`).

    Args:
        job_name: a DNS label (lower-case letters, digits, ``-``), at most 40 characters; every
            object's name starts with it.
        workers: training ranks, ``>= 1``.
        servers: parameter-server shards; 0 means allreduce under the MPI operator.
        image: the container image (``docker/Dockerfile`` or ``docker/Dockerfile.cuda``).
        gpus: GPUs per worker pod (``nvidia.com/gpu`` limit); 0 for CPU only.
        train_args: extra ``distconv train`` arguments, appended after the ones the deployment
            owns (``--sync``, ``--pservers``, ``--keys``, ``--health-port``,
            ``--health-host``, ``--resume auto``); ``--out`` defaults to a directory on the
            pod's writable run volume.
        mode: the shards' mode, ``"sync"`` or ``"async"`` (parameter-server jobs only).
        slots_per_worker: ranks per MPI worker pod (MPI jobs only).
        mpi: force the MPIJob (True) or the parameter-server shape (False); by default an MPIJob
            exactly when ``servers == 0``.

    Returns:
        ``[Service, StatefulSet, Job]`` for a parameter-server job, ``[MPIJob]`` otherwise.

    Raises:
        ValueError: an argument is out of range or the combination is impossible.
    """
    use_mpi = servers == 0 if mpi is None else bool(mpi)
    _check_args(job_name, workers, servers, image, gpus, train_args, mode, slots_per_worker)
    if use_mpi and servers:
        raise ValueError(f"an MPIJob runs allreduce without shards; got servers={servers}")
    if not use_mpi and not servers:
        raise ValueError("a parameter-server job needs servers >= 1 (servers=0 means MPI)")
    job = _Job(job_name, workers, servers, image, gpus, tuple(train_args), mode, slots_per_worker)
    if use_mpi:
        return [job.mpijob()]
    return [job.pserver_service(), job.pserver_statefulset(), job.worker_job()]


def _check_args(job_name, workers, servers, image, gpus, train_args, mode, slots) -> None:
    if not isinstance(job_name, str) or not _DNS_LABEL.fullmatch(job_name):
        raise ValueError(
            f"job_name must be a DNS label (a-z, 0-9, '-', starting with a letter), got "
            f"{job_name!r}"
        )
    if len(job_name) > MAX_JOB_NAME:
        raise ValueError(f"job_name must be at most {MAX_JOB_NAME} characters, got {job_name!r}")
    for name, value, low in (
        ("workers", workers, 1),
        ("servers", servers, 0),
        ("gpus", gpus, 0),
        ("slots_per_worker", slots, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if not isinstance(image, str) or not image or any(c.isspace() for c in image):
        raise ValueError(f"image must be a non-empty image reference without spaces: {image!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if isinstance(train_args, str) or not all(isinstance(a, str) for a in train_args):
        raise ValueError(f"train_args must be a sequence of strings, got {train_args!r}")
    owned = [a for a in train_args if a.split("=", 1)[0] in OWNED_FLAGS]
    if owned:
        raise ValueError(f"train_args must leave {', '.join(owned)} to the deployment")


class _Job:
    """The pieces every object of one job shares; one method per object."""

    def __init__(self, name, workers, servers, image, gpus, train_args, mode, slots) -> None:
        self.name = name
        self.workers = workers
        self.servers = servers
        self.image = image
        self.gpus = gpus
        self.train_args = train_args
        self.mode = mode
        self.slots = slots
        self.pserver = f"{name}-pserver"

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

    def pserver_addresses(self) -> list[str]:
        """Every shard's stable DNS name and port, in shard order."""
        return [f"{self.pserver}-{i}.{self.pserver}:{PS_PORT}" for i in range(self.servers)]

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
    ) -> Manifest:
        """A container of the image; only ``args`` is set, so tini stays the entry point."""
        limits: dict[str, Any] = dict(resources)
        if gpus:
            limits["nvidia.com/gpu"] = gpus
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
            spec.update(_probes())
        return spec

    def rank_env(
        self, role: str, world_size: int | None, threads: int, gpu: bool
    ) -> list[Manifest]:
        """What a training process needs to know about itself, besides its rank."""
        env = [_env("DISTCONV_ROLE", role), _env("DISTCONV_JOB_ID", self.name)]
        if world_size is not None:
            env.append(_env("DISTCONV_WORLD_SIZE", str(world_size)))
        # matplotlib and friends want a writable config directory; the root fs is read-only
        env.append(_env("MPLCONFIGDIR", "/tmp/matplotlib"))
        # one BLAS pool per process, sized to its share of the CPU limit: nothing oversubscribes
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.append(_env(name, str(threads)))
        env.append(_env("DISTCONV_NUM_THREADS", str(threads)))
        if gpu:
            env.append(_env("DISTCONV_DEVICE", "gpu"))
        return env

    # -- parameter-server shape -----------------------------------------------------------------

    def pserver_service(self) -> Manifest:
        """Headless, and publishing pods before they are ready: workers must reach the shards
        to seed them, and a shard is only ready once seeded."""
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": self.metadata(self.pserver, "pserver"),
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": self.selector("pserver"),
                "ports": [
                    {"name": "ps", "port": PS_PORT, "targetPort": "ps"},
                    {"name": "health", "port": HEALTH_PORT, "targetPort": "health"},
                ],
            },
        }

    def pserver_statefulset(self) -> Manifest:
        args = ["distconv", "pserver", "--bind", f"0.0.0.0:{PS_PORT}"]
        args += ["--shard", "$(DISTCONV_SHARD)", "--num-shards", str(self.servers)]
        args += ["--workers", str(self.workers), "--mode", self.mode, "--keys", KEYS_DIR]
        args += ["--checkpoint-dir", CHECKPOINT_DIR, *HEALTH_ARGS]
        env = self.rank_env("server", self.servers, _cpus(SERVER_RESOURCES), gpu=False)
        env += [
            _env("DISTCONV_KEYS", KEYS_DIR),
            _env("DISTCONV_RANK_FROM_HOSTNAME", "1"),
            {
                "name": "DISTCONV_SHARD",
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}},
            },
        ]
        container = self.container(
            "pserver",
            args,
            SERVER_RESOURCES,
            env=env,
            mounts=[_keys_mount(), {"name": "checkpoints", "mountPath": CHECKPOINT_DIR}],
            ports=[_port("ps", PS_PORT), _port("health", HEALTH_PORT)],
        )
        claim = {
            "metadata": {"name": "checkpoints", "labels": self.labels("pserver")},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
        return {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": self.metadata(self.pserver, "pserver"),
            "spec": {
                "serviceName": self.pserver,
                "replicas": self.servers,
                # shards are peers, not a chain: start and replace them all at once
                "podManagementPolicy": "Parallel",
                "selector": {"matchLabels": self.selector("pserver")},
                "template": {
                    "metadata": {"labels": self.labels("pserver")},
                    "spec": self.pod_spec(container, [_tmp_volume(), self.keys_volume("server")]),
                },
                "volumeClaimTemplates": [claim],
            },
        }

    def keys_volume(self, side: str) -> Manifest:
        """The ``side`` (``"server"`` or ``"worker"``) Secret: each side gets only its keys."""
        # 0440 + fsGroup: readable by the non-root user's group, by nobody else
        return {
            "name": "keys",
            "secret": {"secretName": f"{self.name}-{side}-keys", "defaultMode": 0o440},
        }

    def train_argv(self) -> list[str]:
        """The user's train arguments, resuming on a restart, writing onto the run volume."""
        out = [] if _has_flag(self.train_args, "--out") else ["--out", f"{WORK_DIR}/train"]
        return [*RESUME_ARGS, *out, *self.train_args]

    def worker_job(self) -> Manifest:
        servers = ",".join(self.pserver_addresses())
        args = ["distconv", "train", "--sync", "pserver", "--pservers", servers]
        args += ["--keys", KEYS_DIR, *HEALTH_ARGS, *self.train_argv()]
        env = self.rank_env("worker", self.workers, _cpus(WORKER_RESOURCES), self.gpus > 0)
        env += [_env("DISTCONV_PSERVERS", servers), _env("DISTCONV_KEYS", KEYS_DIR)]
        container = self.container(
            "worker",
            args,
            WORKER_RESOURCES,
            env=env,
            mounts=[_keys_mount(), {"name": "work", "mountPath": WORK_DIR}],
            ports=[_port("health", HEALTH_PORT)],
            gpus=self.gpus,
        )
        container["workingDir"] = WORK_DIR
        volumes = [_tmp_volume(), self.keys_volume("worker"), _work_volume()]
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": self.metadata(f"{self.name}-worker", "worker"),
            "spec": {
                "completionMode": "Indexed",
                "completions": self.workers,
                "parallelism": self.workers,
                "backoffLimit": 3 * self.workers,
                "template": {
                    "metadata": {"labels": self.labels("worker")},
                    # OnFailure restarts the container in the same pod, so the run directory
                    # (and the chief's checkpoint in it) survives for --resume
                    "spec": self.pod_spec(container, volumes, restartPolicy="OnFailure"),
                },
            },
        }

    # -- allreduce shape ------------------------------------------------------------------------

    def mpijob(self) -> Manifest:
        pods = -(-self.workers // self.slots)
        # a pod holds `slots` ranks: it gets a worker's share of CPU and memory for each
        resources = {k: _times(v, self.slots) for k, v in WORKER_RESOURCES.items()}
        threads = _cpus(WORKER_RESOURCES)
        args = ["mpirun", "-np", str(self.workers), "python", "-m", "mpi4py", "-m", "distconv"]
        args += ["train", "--sync", "mpi", *HEALTH_ARGS, *self.train_argv()]
        launcher = self.container(
            "launcher",
            args,
            LAUNCHER_RESOURCES,
            # mpirun (MPICH Hydra) hands its environment to every rank it starts over ssh; the
            # worker pods' own environment never reaches them. Rank and size come from PMI.
            env=self.rank_env("worker", None, threads, self.gpus > 0),
            mounts=[_work_mount()],
            ports=[],
            probed=False,
        )
        # Hydra starts each rank in mpirun's working directory: the same path on every pod
        launcher["workingDir"] = WORK_DIR
        sshd = ["/usr/sbin/sshd", "-De", "-f", f"{HOME}/.sshd_config"]
        worker = self.container(
            "worker",
            sshd,
            resources,
            env=[],
            mounts=[_work_mount()],
            ports=[_port("ssh", SSH_PORT), _port("health", HEALTH_PORT)],
            gpus=self.gpus,
            probed=False,
        )
        worker["workingDir"] = WORK_DIR
        # sshd serves before any rank runs (gang scheduling may take long): no readiness or
        # startup gate; liveness judges only ranks that are running, on their own ports
        worker["livenessProbe"] = _rank_liveness(self.slots)
        # sshd must outlive the ranks it started, or they die mid-checkpoint
        worker["lifecycle"] = {"preStop": {"exec": {"command": _wait_for_ranks()}}}
        return {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": self.metadata(self.name, "mpijob"),
            "spec": {
                "slotsPerWorker": self.slots,
                "mpiImplementation": "MPICH",
                "sshAuthMountPath": f"{HOME}/.ssh",
                "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 3},
                "mpiReplicaSpecs": {
                    "Launcher": self.replica(1, "launcher", launcher, "OnFailure"),
                    "Worker": self.replica(pods, "worker", worker, "Never"),
                },
            },
        }

    def replica(self, replicas: int, component: str, container: Manifest, restart: str):
        return {
            "replicas": replicas,
            "restartPolicy": restart,
            "template": {
                "metadata": {"labels": self.labels(component)},
                "spec": self.pod_spec(container, [_tmp_volume(), _work_volume()]),
            },
        }


def _probes() -> Manifest:
    """Readiness on /readyz, liveness on /healthz; the startup probe holds liveness off while
    a rank waits for its peers (or, under MPI, for mpirun to start it)."""

    def probe(path: str, period: int, failures: int) -> Manifest:
        return {
            "httpGet": {"path": path, "port": "health"},
            "periodSeconds": period,
            "failureThreshold": failures,
            "timeoutSeconds": 5,
        }

    return {
        # /readyz, not /healthz: /healthz is 200 before the first beat, so a startup probe on
        # it would pass at once; liveness starts once the rank has its parameters
        "startupProbe": probe("/readyz", 10, STARTUP_SECONDS // 10),
        "readinessProbe": probe("/readyz", 5, 3),
        "livenessProbe": probe("/healthz", 30, 3),
    }


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


#: exit 0 while no rank listens (none started yet, or all done); else every listening rank's
#: /healthz must answer 200
_RANK_LIVENESS = """\
import socket, sys, urllib.request
for port in range({first}, {stop}):
    try:
        socket.create_connection(("127.0.0.1", port), 2).close()
    except OSError:
        continue
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{{port}}/healthz", timeout=4)
    except Exception as exc:
        sys.exit(f"rank on port {{port}}: {{exc}}")
"""


def _rank_liveness(slots: int) -> Manifest:
    """An MPI worker pod's liveness: the /healthz of each rank that runs there."""
    script = _RANK_LIVENESS.format(first=HEALTH_PORT, stop=HEALTH_PORT + slots)
    return {
        "exec": {"command": ["python", "-c", script]},
        "periodSeconds": 30,
        "failureThreshold": 3,
        "timeoutSeconds": 10,
    }


def _wait_for_ranks() -> list[str]:
    """preStop: wait while a distconv rank runs in the pod, at most the grace period.

    ``[d]istconv`` matches the ranks' command lines but not this shell's or grep's own.
    """
    loop = (
        f"i=0; while [ $i -lt {GRACE_SECONDS} ] && "
        "grep -qs '[d]istconv' /proc/[0-9]*/cmdline; do sleep 1; i=$((i+1)); done"
    )
    return ["/bin/sh", "-c", loop]


def _times(quantity: str, n: int) -> str:
    """A whole-number Kubernetes quantity ("2", "4Gi") times ``n``."""
    digits = quantity.rstrip("KMGTPEi")
    return f"{int(digits) * n}{quantity[len(digits) :]}"


def _cpus(resources: dict[str, str]) -> int:
    """Whole CPUs (at least one) in a container's CPU quantity ("2", "500m")."""
    quantity = resources["cpu"]
    whole = int(quantity[:-1]) // 1000 if quantity.endswith("m") else int(quantity)
    return max(1, whole)


# -- output -------------------------------------------------------------------------------------

#: plain YAML scalars that read back as the same string in YAML 1.1 and 1.2 alike
_PLAIN = re.compile(r"[A-Za-z/][A-Za-z0-9_./-]*")
#: words YAML 1.1 reads as booleans or null
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def dump_yaml(objs: Sequence[Manifest]) -> str:
    """The manifests as one multi-document YAML stream, in block style, keys in order.

    A small emitter for the types manifests hold (dict, list, str, int, bool), so rendering
    needs no YAML library: strings that could read back as anything else are written as JSON
    strings, which YAML reads as the same text.
    """
    docs = ["\n".join(_block(obj, 0)) + "\n" for obj in objs]
    return "".join(f"---\n{doc}" for doc in docs)


def _block(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict) and value:
        lines = []
        for key, item in value.items():
            if _is_inline(item):
                lines.append(f"{pad}{_scalar(key)}: {_scalar(item)}")
            else:
                lines.append(f"{pad}{_scalar(key)}:")
                lines.extend(_block(item, indent + 2))
        return lines
    if isinstance(value, list) and value:
        lines = []
        for item in value:
            if _is_inline(item):
                lines.append(f"{pad}- {_scalar(item)}")
            else:
                nested = _block(item, indent + 2)
                nested[0] = f"{pad}- {nested[0][indent + 2 :]}"
                lines.extend(nested)
        return lines
    return [f"{pad}{_scalar(value)}"]


def _is_inline(value: Any) -> bool:
    return not isinstance(value, (dict, list)) or not value


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    if isinstance(value, str):
        if _PLAIN.fullmatch(value) and value.lower() not in _RESERVED:
            return value
        return json.dumps(value)
    raise TypeError(f"cannot write {type(value).__name__} {value!r} into a manifest")


def manifest_filename(obj: Manifest) -> str:
    """``<kind>-<name>.yaml``, lower case: one file per object."""
    return f"{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"


def write_manifests(objs: Sequence[Manifest], folder: str | os.PathLike[str]) -> list[Path]:
    """Write each manifest to ``folder/<kind>-<name>.yaml`` (made if missing); return the paths.

    ``kubectl apply -f folder`` then creates the whole job.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for obj in objs:
        path = out / manifest_filename(obj)
        path.write_text(dump_yaml([obj]), encoding="utf-8")
        paths.append(path)
    return paths


#: the checked-in examples under k8s/: folder name -> render_manifests arguments
EXAMPLE_TRAIN_ARGS = ("--data", "digits", "--epochs", "10", "--batch-size", "64")
EXAMPLES: dict[str, dict[str, Any]] = {
    "pserver": dict(job_name="digits-ps", workers=4, servers=2, image="distconv:0.1.0"),
    "pserver-gpu": dict(
        job_name="digits-ps-gpu", workers=4, servers=2, image="distconv:0.1.0-cuda12", gpus=1
    ),
    "mpijob": dict(job_name="digits-mpi", workers=4, servers=0, image="distconv:0.1.0"),
    "mpijob-gpu": dict(
        job_name="digits-mpi-gpu",
        workers=8,
        servers=0,
        image="distconv:0.1.0-cuda12",
        gpus=4,
        slots_per_worker=4,
    ),
}


def write_examples(root: str | os.PathLike[str]) -> list[Path]:
    """Render every example of :data:`EXAMPLES` into ``root/<example>/``; return the paths."""
    paths = []
    for folder, kwargs in EXAMPLES.items():
        objs = render_manifests(train_args=EXAMPLE_TRAIN_ARGS, **kwargs)
        paths += write_manifests(objs, Path(root) / folder)
    return paths
