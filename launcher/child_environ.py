"""The environment of a local job's children: the launcher's own, without another launcher's
placement variables, plus the runtime's (role, rank, job, shards, keys) and the thread pools'
sizes, which share the cores this process may run on among the children.

Pure, as :mod:`launcher.commands`, which builds what the children run: nothing here starts a
process or touches the disk but to count the usable cores.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from distconv.cores import usable_cores

from .stderr_line import bounded_log

#: variables a parent launcher or scheduler may have left behind; a child that inherited them
#: would see two sources for its rank (the runtime refuses that), or size its threads for
#: another job's processes on the host, so they never pass through
PLACEMENT_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "JOB_COMPLETION_INDEX",
    "DISTCONV_WORLD_SIZE",
    "DISTCONV_RANK_FROM_HOSTNAME",
    "DISTCONV_LAUNCHER",  # an enclosing launcher's process: this one's children follow their own
)
PLACEMENT_PREFIXES = ("OMPI_COMM_WORLD_", "PMI_", "PMIX_", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")

#: the thread pools of every BLAS numpy may be linked against
BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: distconv's own kernels' thread count (a step's parallelism: BLAS is held to one thread there)
KERNEL_THREADS_VAR = "DISTCONV_NUM_THREADS"
#: ... and every pool's
THREAD_VARS = (*BLAS_THREAD_VARS, KERNEL_THREADS_VAR)


def unpassed_threads(
    environ: Mapping[str, str], flag: int | None, threads: int | None
) -> str | None:
    """The launcher's one line at start where ``environ`` (its shell's) sets
    ``DISTCONV_NUM_THREADS`` and no ``--threads`` was given (``flag``): the launcher sizes its
    children's kernel threads itself (``threads`` each, or None where each rank sizes its own
    on its host), so the variable, which a plain ``distconv train`` honours, is not passed on,
    and a job moved under the launcher took more cores than its user set without a word. None
    where ``--threads`` was given or the variable is unset or empty."""
    given = environ.get(KERNEL_THREADS_VAR, "").strip()
    if flag or not given:
        return None
    each = (
        f"each worker runs {threads} kernel thread(s)"
        if threads is not None
        else "each rank sizes its kernel threads to its share of its host's cores"
    )
    flag_said = f"--threads {given if given.isdigit() and int(given) > 0 else 'N'}"
    return f"{KERNEL_THREADS_VAR}={given} in this shell is not passed on: {each}; pass {flag_said}"


def threads_per_process(processes: int, cpus: int | None = None) -> int:
    """BLAS threads per child so ``processes`` children share the cores without oversubscribing.

    ``cpus`` defaults to the cores this process may run on (its affinity mask, which taskset,
    cgroup cpusets and batch schedulers narrow), not every core of the machine.
    """
    cpus = cpus or usable_cpus()
    return max(1, cpus // max(1, processes))


def usable_cpus() -> int:
    """The cores this process may run on: its affinity capped by a container's CPU quota, as
    each rank counts them (:func:`distconv.cores.usable_cores`, which stands
    ``os.cpu_count()`` for the mask outside Linux); ``os.cpu_count()`` where the mask cannot be
    read."""
    try:
        with bounded_log("distconv.cores"):  # its warning of a malformed quota: never blocks
            return usable_cores()
    except OSError:  # sched_getaffinity failed
        return os.cpu_count() or 1


def clean_environ(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without any other launcher's placement variables (see PLACEMENT_VARS)."""
    return {
        k: v
        for k, v in environ.items()
        if k not in PLACEMENT_VARS and not k.startswith(PLACEMENT_PREFIXES)
    }


@dataclass(frozen=True)
class JobEnv:
    """What every child of one local job shares."""

    job_id: str
    pservers: tuple[str, ...] = ()
    keys_dir: str | None = None
    threads: int = 1
    restart: int = 0
    launch: str | None = None
    #: shards without CURVE: said to every child (``DISTCONV_INSECURE``), so a script's
    #: ``distconv.distributed.init`` asks for no keys (``distconv train`` gets ``--insecure``)
    insecure: bool = False
    #: the launcher's :func:`~distconv.procfs.process_identity` (``DISTCONV_LAUNCHER``): a
    #: child, and a process it starts in turn, stops when the launcher ends
    #: (:mod:`distconv.launch_env`)
    launcher: str = ""


def child_env(
    environ: Mapping[str, str], job: JobEnv, role: str, rank: int, world_size: int
) -> dict[str, str]:
    """The environment of one child: the launcher's, cleaned, plus the runtime's variables.

    Args:
        environ: the launcher's environment.
        job: what all children share.
        role: ``"worker"`` or ``"server"``.
        rank: the child's rank among its role (a server's shard index).
        world_size: how many children have this role.
    """
    env = clean_environ(environ)
    env.update(
        DISTCONV_ROLE=role,
        RANK=str(rank),
        WORLD_SIZE=str(world_size),
        LOCAL_RANK=str(rank),  # every child of a local job is on this host
        DISTCONV_JOB_ID=job.job_id,
        DISTCONV_RESTART=str(job.restart),
        PYTHONUNBUFFERED="1",  # lines reach the launcher as they are written
    )
    if job.pservers:
        env["DISTCONV_PSERVERS"] = ",".join(job.pservers)
    else:
        env.pop("DISTCONV_PSERVERS", None)
    if job.keys_dir is not None:
        env["DISTCONV_KEYS"] = job.keys_dir
    else:
        env.pop("DISTCONV_KEYS", None)
    if job.insecure:
        env["DISTCONV_INSECURE"] = "1"
    else:  # an enclosing shell's must not turn CURVE off for this job's workers
        env.pop("DISTCONV_INSECURE", None)
    if job.launch is not None:
        env["DISTCONV_LAUNCH"] = job.launch
    else:  # a launch of an enclosing launcher is not this job's
        env.pop("DISTCONV_LAUNCH", None)
    if job.launcher:
        env["DISTCONV_LAUNCHER"] = job.launcher
    env.update(dict.fromkeys(THREAD_VARS, str(job.threads)))
    return env
