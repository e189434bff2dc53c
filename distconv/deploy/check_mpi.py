"""The checks of an MPIJob (part of :func:`distconv.deploy.check.manifest_problems`): the
operator starts the image's mpirun and sshd as they need (``mpiImplementation``,
``sshAuthMountPath``), ``mpirun -np`` fits in the worker slots and leaves no worker pod idle,
a GPU worker pod requests no more devices than its ranks use, and the ranks' watchdog
``--timeout`` is below their ``--stall-seconds`` where a liveness probe asks their ``/healthz``
(:mod:`distconv.deploy.mpi_timeouts`). A count field that is no integer is named by
:func:`~distconv.deploy.counts.count_problems` alone: nothing is compared with it here.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Iterator, Sequence
from typing import Any

from distconv.deploy.check_ranks import (
    _as_read,
)
from distconv.deploy.check_shards import _is_filled, expand
from distconv.deploy.check_timeouts import rank_seconds
from distconv.deploy.counts import count, counted
from distconv.deploy.mpi_timeouts import STALL, TIMEOUT, order_problem
from distconv.deploy.mpijob import MPI_IMPLEMENTATION, SSH_AUTH_MOUNT_PATH, SSHD_CONFIG
from distconv.deploy.walk import (
    Manifest,
    _any_runs,
    _argv,
    _command_args,
    _digits,
    _flag,
    _main_containers,
    _of_kind,
    _pod,
    _process_counts,
    _templates,
    _where,
    program_words,
)

#: the operator's defaults (its CRD's) for the fields the image needs set otherwise
OPERATOR_DEFAULTS = {"mpiImplementation": "OpenMPI", "sshAuthMountPath": "/root/.ssh"}
#: the variable in which the operator gives mpirun the worker pods' host names, by
#: ``mpiImplementation`` (its controller's ompiEnvVars, intelEnvVars, mpichEnvVars)
HOST_FILE_VARIABLES = {
    "OpenMPI": "OMPI_MCA_orte_default_hostfile",
    "Intel": "I_MPI_HYDRA_HOST_FILE",
    MPI_IMPLEMENTATION: "HYDRA_HOST_FILE",
}


def _mpi_launch_settings(objs: Sequence[Manifest]) -> Iterator[str]:
    """An MPIJob whose ranks run ``distconv train`` in this image (its worker pods' sshd started
    with the image's :data:`~distconv.deploy.mpijob.SSHD_CONFIG`) runs the image's mpirun
    (MPICH's Hydra) and sshd, which need ``mpiImplementation: MPICH`` and ``sshAuthMountPath``
    where the image's sshd reads its keys (:mod:`~distconv.deploy.mpijob`). Either left out
    takes the operator's default, which the CRD schema takes: only the cluster would show it,
    and only as ranks crowded into the launcher pod or worker pods that crash-loop. An image of
    the operator's own (Intel MPI, an sshd of its own reading keys in /root/.ssh) is not
    judged: its MPI and key directory are its own."""
    for mpijob in _of_kind(objs, "MPIJob"):
        # not distconv's ranks, or not this image's sshd and mpirun
        if not _any_runs(mpijob, "train") or not runs_the_images_sshd(mpijob):
            continue
        spec = mpijob.get("spec", {})
        implementation = spec.get("mpiImplementation")
        if implementation != MPI_IMPLEMENTATION:
            yield (
                f"{_where(mpijob)}: {_setting('mpiImplementation', implementation)}: "
                f"{_hosts_unread(implementation)}; set mpiImplementation: {MPI_IMPLEMENTATION}"
            )
        mount = spec.get("sshAuthMountPath")
        if not (isinstance(mount, str) and posixpath.normpath(mount) == SSH_AUTH_MOUNT_PATH):
            yield (
                f"{_where(mpijob)}: {_setting('sshAuthMountPath', mount)}: the operator mounts "
                "its ssh keys there, but the image's sshd reads its host key and "
                f"authorized_keys in {SSH_AUTH_MOUNT_PATH}, and the launcher's ssh its identity: "
                "every worker's sshd would exit (no host key) and mpirun reach no worker pod; "
                f"set sshAuthMountPath: {SSH_AUTH_MOUNT_PATH}"
            )


def runs_the_images_sshd(mpijob: Manifest) -> bool:
    """Whether a Worker container of ``mpijob`` starts sshd with the image's configuration
    (``sshd -De -f /home/distconv/.sshd_config``, as rendered; ``-f`` joined to its value or
    ending a cluster of flags too), which only this image holds."""
    return any(
        SSHD_CONFIG in _sshd_configs(program_words(container))
        for where, template in _templates(mpijob)
        if where.endswith(" Worker")
        for container in _main_containers(template)
    )


def _sshd_configs(words: list[str]) -> Iterator[str]:
    """The configuration files (``-f FILE``, normalised) that each sshd in ``words`` is given."""
    for at, word in enumerate(words):
        if word.rsplit("/", 1)[-1] != "sshd":
            continue
        rest = words[at + 1 :]
        for i, option in enumerate(rest):
            if not option.startswith("-") or option.startswith("--") or "f" not in option:
                continue
            joined = option[option.index("f") + 1 :]  # -fFILE; -Def FILE
            value = joined or (rest[i + 1] if i + 1 < len(rest) else "")
            if value:
                yield posixpath.normpath(value)


def _setting(field: str, value: Any) -> str:
    """How a line names the MPIJob's ``field`` of ``value``: an unset one (or null, which the
    API server drops) by the operator's default that then applies."""
    if value is None:
        return f"{field} is unset, so the operator's default, {OPERATOR_DEFAULTS[field]}, applies"
    return f"{field} is {value!r}"


def _hosts_unread(implementation: Any) -> str:
    """What goes wrong under the ``mpiImplementation`` of ``implementation`` (not MPICH)."""
    if implementation is None:
        implementation = OPERATOR_DEFAULTS["mpiImplementation"]
    variable = HOST_FILE_VARIABLES.get(implementation) if isinstance(implementation, str) else None
    if variable is None:
        return f"the operator takes only {', '.join(HOST_FILE_VARIABLES)} and refuses the MPIJob"
    return (
        f"the operator names the worker pods to mpirun in {variable}, which the image's mpirun "
        "(MPICH's Hydra) does not read: it would start every rank in the launcher pod, and the "
        "worker pods would sit idle"
    )


def _mpi_slots(objs: Sequence[Manifest]) -> Iterator[str]:
    """``mpirun -np`` is one number, fits in the slots of the pods that run ranks, and fills
    each of them but the last: Hydra fills the hosts' slots in order, so a pod past the ranks
    would hold its CPU, memory and GPUs idle for the whole job. Where mpirun places the ranks
    otherwise (``-ppn 1``, ``-rr``: one a host), its pods are not counted idle."""
    for mpijob in _of_kind(objs, "MPIJob"):
        spec = mpijob.get("spec", {})
        replicas = spec.get("mpiReplicaSpecs", {})
        worker, slots = replicas.get("Worker", {}), count(spec, "slotsPerWorker", 1)
        on_launcher = int(bool(spec.get("runLauncherAsWorker")))
        pods = count(worker, "replicas", 0) + on_launcher
        capacity = pods * slots
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
            elif (
                _fills_in_order(_argv(container))
                and known
                and slots
                and ((filled := math.ceil(int(np) / slots)) < pods)
            ):
                yield (
                    f"{_where(mpijob)} Launcher: -np {np} fills the slots of {filled} of the "
                    f"{pods} pods that run ranks (slotsPerWorker {slots}): the other "
                    f"{pods - filled} worker pod(s) would sit idle, holding their CPU and "
                    f"memory; set the Worker replicas to {filled - on_launcher}, or -np to "
                    f"{capacity}"
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


#: Hydra's options that place the ranks otherwise than by filling each host's slots in order
#: (``-ppn 1``: one a host, round robin), so that no pod past the first ranks need be idle
_PLACEMENT = {"-ppn", "-perhost", "-grr", "-rr"}


def _fills_in_order(argv: list[str]) -> bool:
    """Whether mpirun's own options in ``argv`` (before the Python it starts) leave Hydra to
    fill each host's slots in order, as the idle-pod count assumes: no :data:`_PLACEMENT`
    option, with one dash or two, its value apart or after ``=``."""
    for arg in argv:
        if arg.rsplit("/", 1)[-1].startswith("python"):
            break
        if arg.startswith("-") and "-" + arg.partition("=")[0].lstrip("-") in _PLACEMENT:
            return False
    return True


#: the names Hydra's process manager goes by
_MPIRUN = {"mpirun", "mpiexec", "mpiexec.hydra"}
