"""The allreduce workload: a Kubeflow ``MPIJob`` (``kubeflow.org/v2beta1``) whose launcher runs
``mpirun`` and whose worker pods run ``sshd`` (see :mod:`distconv.deploy.render`)."""

from __future__ import annotations

from distconv.deploy.mpi_timeouts import watchdog_args
from distconv.deploy.pod import (
    GRACE_SECONDS,
    HEALTH_PORT,
    HOME,
    WORK_DIR,
    WORKER_RESOURCES,
    Manifest,
    _cpus,
    _JobBase,
    _port,
    _times,
    _tmp_volume,
    _work_mount,
    _work_volume,
)

#: the worker pods' sshd port
SSH_PORT = 2222
#: the MPI of the image's mpirun (MPICH's Hydra, from the mpi4py wheel): the operator names the
#: hosts in this implementation's variable (HYDRA_HOST_FILE), the one Hydra reads
MPI_IMPLEMENTATION = "MPICH"
#: where the operator mounts its ssh key pair and authorized_keys: the image user's ~/.ssh,
#: where docker/sshd_config reads the host key and authorized_keys and the launcher's ssh its
#: identity
SSH_AUTH_MOUNT_PATH = f"{HOME}/.ssh"
#: the sshd configuration the image holds (docker/sshd_config), which the worker pods' sshd is
#: started with: the mark of a worker pod that runs this image's sshd
SSHD_CONFIG = f"{HOME}/.sshd_config"
LAUNCHER_RESOURCES = {"cpu": "500m", "memory": "512Mi"}


class _MpiWorkload(_JobBase):
    """The MPIJob of one job."""

    def mpijob(self) -> Manifest:
        pods = -(-self.workers // self.slots)
        # a pod holds `slots` ranks: it gets a worker's share of CPU and memory for each, and
        # `gpus` per rank, since local rank R uses CUDA device R (distconv.backend.gpu_index)
        resources = {k: _times(v, self.slots) for k, v in WORKER_RESOURCES.items()}
        threads = _cpus(WORKER_RESOURCES)
        args = ["mpirun", "-np", str(self.workers), "python", "-m", "mpi4py", "-m", "distconv"]
        args += ["train", "--sync", "mpi", *self.health_args()]
        # the watchdog names a hang before the stall limit restarts every worker pod
        args += [*watchdog_args(self.train_args), *self.train_argv()]
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
        sshd = ["/usr/sbin/sshd", "-De", "-f", SSHD_CONFIG]
        worker = self.container(
            "worker",
            sshd,
            resources,
            env=[],
            mounts=[_work_mount()],
            ports=[_port("ssh", SSH_PORT), *rank_ports(self.slots)],
            gpus=self.gpus * self.slots,
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
                "mpiImplementation": MPI_IMPLEMENTATION,
                "sshAuthMountPath": SSH_AUTH_MOUNT_PATH,
                "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 3},
                "mpiReplicaSpecs": {
                    "Launcher": self.replica(1, "launcher", launcher, "OnFailure"),
                    # OnFailure: a liveness kill restarts sshd in the same pod (its name, its
                    # address, its run directory kept), where the launcher's retry finds it and
                    # rank 0 resumes; under Never the pod would stay Failed, and the operator
                    # recreates no worker pod that exists, so the MPIJob would fail
                    "Worker": self.replica(pods, "worker", worker, "OnFailure"),
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


def rank_ports(slots: int) -> list[Manifest]:
    """An MPI worker pod's ports for its ranks' probes and metrics: local rank ``R`` serves on
    ``HEALTH_PORT + R`` (``--health-port`` plus the local rank), so one port per slot.

    Prometheus's pod discovery and a PodMonitor find only declared ports: with ``health``
    alone, three ranks of four a pod went unscraped. Local rank 0's keeps the name ``health``,
    which every pod of every job has (the probes' port, and what the checks look for); the
    others are ``health-R``, valid port names (IANA service names: at most 15 characters,
    lower-case letters, digits and single inner ``-``) for every slot a port number allows.
    """
    return [_port(f"health-{r}" if r else "health", HEALTH_PORT + r) for r in range(slots)]


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
    """preStop: ask the pod's ranks to stop (SIGTERM), then wait while one runs, at most the
    grace period.

    A pod stopped alone (a node drain, an eviction) gets no SIGTERM through mpirun, which runs
    in the launcher's pod: without its own, a rank would train on until the grace period ends
    and the kubelet kills it, without a checkpoint. On SIGTERM the ranks agree with the others
    on a step to stop at and checkpoint (:mod:`distconv.stop_request`); a second SIGTERM, from
    mpirun when the whole job is stopped, changes nothing.

    Every rank is ``python -m mpi4py -m distconv train ...``. The pattern must not be
    "distconv": sshd's own command line (``-f /home/distconv/.sshd_config``) and its
    per-connection processes (``sshd: distconv@notty``, the user) hold that word, so the hook
    would stop sshd and wait the whole grace period. ``[m]pi4py`` matches the ranks but not this
    shell's or grep's own command line.
    """
    signal = (
        "for f in /proc/[0-9]*/cmdline; do grep -qs '[m]pi4py' \"$f\" && p=${f%/cmdline} && "
        "kill -TERM ${p#/proc/} 2>/dev/null; done; "
    )
    loop = (
        f"i=0; while [ $i -lt {GRACE_SECONDS} ] && "
        "grep -qs '[m]pi4py' /proc/[0-9]*/cmdline; do sleep 1; i=$((i+1)); done"
    )
    return ["/bin/sh", "-c", signal + loop]
