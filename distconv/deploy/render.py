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
requests and limits (plus ``nvidia.com/gpu``, ``gpus`` per rank), a grace period long enough to
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

from distconv.deploy.mpijob import LAUNCHER_RESOURCES, SSH_PORT, _MpiWorkload
from distconv.deploy.pod import (
    ANY_ADDRESS,
    GRACE_SECONDS,
    HEALTH_PORT,
    HOME,
    KEYS_DIR,
    RESUME_ARGS,
    SHARD_STARTUP_SECONDS,
    STARTUP_SECONDS,
    USER_ID,
    WORK_DIR,
    WORKER_RESOURCES,
    Manifest,
)
from distconv.deploy.pserver import (
    CHECKPOINT_DIR,
    POD_INDEX_LABEL,
    PS_PORT,
    SERVER_RESOURCES,
    _PserverWorkloads,
)
from distconv.deploy.render_args import (
    ENVIRONMENT_FLAGS,
    MAX_JOB_NAME,
    MODES,
    OWNED_FLAGS,
    _check_args,
    _check_shards_timeout,
    _check_staleness,
    _check_train_args,
    _undecoded,
)
from distconv.deploy.write import write_folders
from distconv.sync.ps.config import check_workers

#: the highest TCP port
MAX_PORT = 65535

# The pieces live in pod.py (shared by every workload), pserver.py and mpijob.py; their
# constants are re-exported here, where callers have always imported them from.
__all__ = [
    "CHECKPOINT_DIR",
    "EXAMPLES",
    "ENVIRONMENT_FLAGS",
    "EXAMPLE_TRAIN_ARGS",
    "GRACE_SECONDS",
    "ANY_ADDRESS",
    "HEALTH_PORT",
    "HOME",
    "KEYS_DIR",
    "LAUNCHER_RESOURCES",
    "MAX_JOB_NAME",
    "MODES",
    "Manifest",
    "OWNED_FLAGS",
    "POD_INDEX_LABEL",
    "PS_PORT",
    "RESUME_ARGS",
    "SERVER_RESOURCES",
    "SHARD_STARTUP_SECONDS",
    "SSH_PORT",
    "STARTUP_SECONDS",
    "USER_ID",
    "WORKER_RESOURCES",
    "WORK_DIR",
    "dump_yaml",
    "manifest_filename",
    "render_manifests",
    "write_examples",
    "write_manifests",
]


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
    ipv6: bool = False,
    max_staleness: int | None = None,
) -> list[Manifest]:
    """The manifests of one job, ready for ``kubectl apply`` (see :func:`dump_yaml`).

    Args:
        job_name: a DNS label (lower-case letters, digits, ``-``), at most 40 characters; every
            object's name starts with it.
        workers: training ranks, ``>= 1``.
        servers: parameter-server shards; 0 means allreduce under the MPI operator.
        image: the container image (``docker/Dockerfile`` or ``docker/Dockerfile.cuda``), a
            reference the kubelet can parse (a lower-case repository).
        gpus: GPUs per training rank; 0 for CPU only. A parameter-server worker pod (one rank)
            gets ``gpus`` as its ``nvidia.com/gpu`` limit, an MPI worker pod
            ``gpus * slots_per_worker``, one device per rank it holds.
        train_args: extra ``distconv train`` arguments, appended after the ones the deployment
            owns (``--sync``, ``--pservers``, ``--keys``, ``--health-port``,
            ``--health-host``, ``--resume auto``, so no ``--overwrite``); ``--out`` defaults to
            a directory on the pod's writable run volume. Abbreviated flags are written out in
            full, as ``distconv train`` reads them; a value it refuses (``--epochs -1``) is
            refused here, as ``distconv-launch k8s`` refuses it. An MPIJob's ranks get
            ``--stall-seconds`` (300) where these give none, and a ``--timeout`` below it
            where they give none; one given that is not below it is refused
            (:mod:`distconv.deploy.mpi_timeouts`). A parameter-server job's shards are
            given the workers' ``--timeout``; one below a shard's least (0.2 s) is refused.
        mode: the shards' mode, ``"sync"`` or ``"async"`` (parameter-server jobs only).
        slots_per_worker: ranks per MPI worker pod (MPI jobs only); ``workers`` must be a
            multiple of it. Local rank ``R`` serves its probes on port ``8080 + R``, each
            declared on the pod (``health``, ``health-1``, ...), so at most 57456 (port 65535).
        mpi: force the MPIJob (True) or the parameter-server shape (False); by default an MPIJob
            exactly when ``servers == 0``.
        ipv6: the shards and probes listen on ``::`` (both families) instead of ``0.0.0.0``,
            for a cluster that gives pods IPv6 addresses (parameter-server jobs only).
        max_staleness: async shards drop a push more than this many updates behind
            (``distconv pserver --max-staleness``, 0 .. 2**63 - 1); None leaves them their
            default. Refused for an MPIJob and with ``mode="sync"``, where no shard reads it.

    Returns:
        ``[Service, StatefulSet, Job]`` for a parameter-server job, ``[MPIJob]`` otherwise.

    Raises:
        ValueError: an argument is out of range or the combination is impossible; the message
            names the ``distconv-launch k8s`` flag that sets it (``--job-name``, not job_name).
    """
    use_mpi = servers == 0 if mpi is None else bool(mpi)
    _check_args(job_name, workers, servers, image, gpus, train_args, mode, slots_per_worker)
    if use_mpi and servers:
        raise ValueError(
            f"an MPIJob (--mpi) runs allreduce without shards, not --servers {servers}"
        )
    if use_mpi and workers % slots_per_worker:
        # the pods are ceil(workers / slots), each billed (CPU, memory, GPUs) for every slot
        raise ValueError(
            f"--workers {workers} is not a multiple of --slots-per-worker {slots_per_worker}: "
            "every MPIJob worker pod holds that many ranks, so one would pay for slots it "
            "never runs"
        )
    if use_mpi and HEALTH_PORT + slots_per_worker - 1 > MAX_PORT:
        # local rank R serves its probes on HEALTH_PORT + R, one container port each
        raise ValueError(
            f"--slots-per-worker {slots_per_worker} puts local rank {slots_per_worker - 1}'s "
            f"probes on port {HEALTH_PORT + slots_per_worker - 1} (--health-port {HEALTH_PORT} "
            f"+ local rank), past {MAX_PORT}"
        )
    if not use_mpi and not servers:
        raise ValueError("a parameter-server job needs --servers >= 1 (--servers 0 means MPI)")
    if not use_mpi:  # every shard would refuse its --workers at start
        try:
            check_workers(workers)
        except ValueError as exc:
            raise ValueError(f"{exc} (the most a parameter-server shard serves)") from None
    if use_mpi and ipv6:  # mpirun's own launch (ssh, Hydra's proxies) was never tried on one
        raise ValueError("--ipv6 renders parameter-server jobs only, not an MPIJob")
    _check_staleness(max_staleness, mode, use_mpi)
    # the launch's own flags all judged: a refusal from here on is the train arguments' alone
    train_args = _check_train_args(train_args)
    _check_shards_timeout(train_args, use_mpi)
    job = _Job(
        job_name,
        workers,
        servers,
        image,
        gpus,
        tuple(train_args),
        mode,
        slots_per_worker,
        ipv6,
        max_staleness,
    )
    if use_mpi:
        return [job.mpijob()]
    return [job.pserver_service(), job.pserver_statefulset(), job.worker_job()]


class _Job(_PserverWorkloads, _MpiWorkload):
    """One job's objects: the parameter-server shape or the MPIJob."""


# -- output -------------------------------------------------------------------------------------

#: plain YAML scalars that read back as the same string in YAML 1.1 and 1.2 alike
_PLAIN = re.compile(r"[A-Za-z/][A-Za-z0-9_./-]*")
#: words YAML 1.1 reads as booleans or null
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def dump_yaml(objs: Sequence[Manifest]) -> str:
    """The manifests as one multi-document YAML stream, in block style, keys in order.

    A small emitter for the types manifests hold (dict, list, str, int, bool), so rendering
    needs no YAML library: strings that could read back as anything else are written
    double-quoted, with escapes every YAML parser reads as the same text (:func:`_quoted`).
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
        return _quoted(value)
    raise TypeError(f"cannot write {type(value).__name__} {value!r} into a manifest")


def _quoted(text: str) -> str:
    """``text`` as a YAML double-quoted scalar: JSON's escapes, but a character past U+FFFF as
    ``\\UXXXXXXXX``. JSON writes it as a surrogate pair, which libyaml and Go's YAML (kubectl)
    refuse ("found invalid Unicode character escape code") and PyYAML reads as two characters.
    """
    if _undecoded(text):
        raise ValueError(
            f"cannot write {text!r} into a manifest: it is not valid text (a lone surrogate)"
        )
    parts = [f"\\U{ord(c):08X}" if ord(c) > 0xFFFF else json.dumps(c)[1:-1] for c in text]
    return f'"{"".join(parts)}"'


def manifest_filename(obj: Manifest) -> str:
    """``<kind>-<name>.yaml``, lower case: one file per object."""
    return f"{obj['kind'].lower()}-{obj['metadata']['name']}.yaml"


def write_manifests(objs: Sequence[Manifest], folder: str | os.PathLike[str]) -> list[Path]:
    """Write each manifest to ``folder/<kind>-<name>.yaml`` (made if missing); return the paths.

    ``kubectl apply -f folder`` then creates the whole job, and only it: a folder that holds
    other YAML files (another job's render) is refused, since the apply would deploy them too;
    this job's own files from an earlier render are replaced.

    The files are replaced together (:func:`~distconv.files.write_all_atomically`): a write
    that fails (a full disk) leaves the earlier render's files as they were, none cut short
    and none beside this render's (a StatefulSet for 4 workers and a Job of 2, which `kubectl
    apply` would take, and whose shards would wait for ever).

    Raises:
        ValueError: the folder holds manifests (YAML or JSON) this render does not write, or
            something other than a file stands where one goes (nothing is written then).
        OSError: a file could not be written.
    """
    return write_folders({Path(folder): _files(objs)})


def _files(objs: Sequence[Manifest]) -> dict[str, bytes]:
    """Each object's file name and YAML, one object per file."""
    return {manifest_filename(obj): dump_yaml([obj]).encode("utf-8") for obj in objs}


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
        gpus=1,
        slots_per_worker=4,
    ),
}


def write_examples(root: str | os.PathLike[str]) -> list[Path]:
    """Render every example of :data:`EXAMPLES` into ``root/<example>/``; return the paths.
    Other manifests in any folder (ValueError) are refused before any example is written."""
    folders = {
        Path(root, f): _files(render_manifests(train_args=EXAMPLE_TRAIN_ARGS, **kw))
        for f, kw in EXAMPLES.items()
    }
    return write_folders(folders)  # every folder checked before any file is written
