"""The checks of an MPIJob (part of :func:`distconv.deploy.check.manifest_problems`):
``mpirun -np`` fits in the worker slots, and the ranks' watchdog ``--timeout`` is below their
``--stall-seconds`` where a liveness probe asks their ``/healthz``
(:mod:`distconv.deploy.mpi_timeouts`). A count field that is no integer is named by
:func:`~distconv.deploy.counts.count_problems` alone: nothing is compared with it here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from distconv.deploy.check_ranks import _as_read
from distconv.deploy.check_shards import _is_filled, expand
from distconv.deploy.check_timeouts import rank_seconds
from distconv.deploy.counts import count, counted
from distconv.deploy.mpi_timeouts import STALL, TIMEOUT, order_problem
from distconv.deploy.walk import (
    Manifest,
    _argv,
    _command_args,
    _digits,
    _flag,
    _of_kind,
    _pod,
    _process_counts,
    _where,
)


def _mpi_slots(objs: Sequence[Manifest]) -> Iterator[str]:
    for mpijob in _of_kind(objs, "MPIJob"):
        spec = mpijob.get("spec", {})
        replicas = spec.get("mpiReplicaSpecs", {})
        worker, slots = replicas.get("Worker", {}), count(spec, "slotsPerWorker", 1)
        capacity = (count(worker, "replicas", 0) + bool(spec.get("runLauncherAsWorker"))) * slots
        # a count that is no integer is named by count_problems: no capacity to compare with
        known = counted(spec, "slotsPerWorker") and counted(worker, "replicas")
        for container in _mpiruns(_pod(replicas.get("Launcher", {})).get("containers", [])):
            counts = _process_counts(_argv(container))
            np = expand(counts[0], container) if counts else None  # as the kubelet passes it
            if len(counts) > 1:  # Hydra: "duplicate setting: np", the job never starts
                yield f"{_where(mpijob)} Launcher: mpirun refuses -np given {len(counts)} times"
            elif np is not None and _is_filled(np):  # only the cluster knows: not judged
                continue
            elif np is None or not _digits(np) or int(np) < 1:
                # -np 0 is not "no ranks": Hydra starts as many as it finds slots for
                yield f"{_where(mpijob)} Launcher: mpirun needs -np with a number, got {np!r}"
            elif known and int(np) > capacity:
                yield (
                    f"{_where(mpijob)} Launcher: -np {np} exceeds the workers' slots "
                    f"({capacity} = replicas x slotsPerWorker)"
                )


def _mpi_timeouts(objs: Sequence[Manifest]) -> Iterator[str]:
    """The ranks' watchdog names a hang before their pods' liveness restarts them all: their
    ``--timeout`` is below their ``--stall-seconds`` (:func:`~mpi_timeouts.order_problem`).
    Not judged where no worker container has a liveness probe (nothing acts on /healthz), the
    ranks serve no probes, a flag is wrong or a value refused (named by the ranks' own checks),
    or a value, or a token where a flag may go (it may set either), is one only the cluster
    knows."""
    for mpijob in _of_kind(objs, "MPIJob"):
        replicas = mpijob.get("spec", {}).get("mpiReplicaSpecs", {})
        workers = _pod(replicas.get("Worker", {})).get("containers", [])
        if not any("livenessProbe" in c for c in workers):
            continue
        for container in _pod(replicas.get("Launcher", {})).get("containers", []):
            args = _command_args(_argv(container), "train")
            problem = None if args is None else _timeout_order(args, container)
            if problem is not None:
                yield f"{_where(mpijob)} Launcher: {problem}"


def _timeout_order(args: list[str], container: Manifest) -> str | None:
    """:func:`~mpi_timeouts.order_problem` of the ranks' ``args`` (after ``train``), read as
    they read them (:func:`~check_timeouts.rank_seconds`); None where it cannot be told here."""
    train, wrong = _as_read(args)
    if wrong is not None or _flag(train, "--health-port", last=True) is None:
        return None
    values = rank_seconds(args, container, TIMEOUT, STALL)
    return None if values is None else order_problem(*values)


def _mpiruns(containers: list[Manifest]) -> list[Manifest]:
    """The launcher's containers that run mpirun (or mpiexec), not a sidecar beside it (a log
    shipper); all of them where none does, as one must."""
    runs = [c for c in containers if {a.rsplit("/", 1)[-1] for a in _argv(c)} & _MPIRUN]
    return runs or containers


#: the names Hydra's process manager goes by
_MPIRUN = {"mpirun", "mpiexec", "mpiexec.hydra"}
