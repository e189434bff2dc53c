"""Checks on a job's manifests that no schema makes.

A schema says a field has the right type; it cannot say that a worker's ``--pservers`` names the
shards that the StatefulSet will create, that ``mpirun -np`` fits in the slots, or that the
Secret with the keys is mounted where ``DISTCONV_KEYS`` points. :func:`manifest_problems` does:
one line per problem in one job's objects (rendered or read back from YAML), none if all is well.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Sequence

from distconv.deploy.check_cronjobs import overlapping_runs
from distconv.deploy.check_images import image_problems
from distconv.deploy.check_mpi import (
    _mpi_launch_settings,
    _mpi_slots,
    _mpi_timeouts,
)
from distconv.deploy.check_ordinals import by_ordinal
from distconv.deploy.check_probes import _mpi_liveness_ports, _probe_problems
from distconv.deploy.check_pservers import _server_lists
from distconv.deploy.check_ranks import _pod_settings, _rank_gpus, _train_runs
from distconv.deploy.check_services import _services_named, _shards_start_together
from distconv.deploy.check_shards import (
    _is_filled,
    _shard_args,
    env_as_seen,
    expand,
)
from distconv.deploy.check_threads import thread_problems
from distconv.deploy.check_timeouts import timeout_problems
from distconv.deploy.check_workers import _worker_counts
from distconv.deploy.counts import count_problems, counted
from distconv.deploy.programs import runs_the_jobs_processes
from distconv.deploy.shapes import applied_objects
from distconv.deploy.walk import (
    Manifest,
    _argv,
    _containers,
    _flag,
    _here,
    _main_containers,
    _of_kind,
    _pod,
    _running,
    _runs,
    _template,
    _templates,
    _where,
    in_container,
    metadata_of,
    metadata_problem,
    object_name,
    pod_hostname,
)

#: a Job (or an MPIJob's launcher) that restarts forever never finishes
JOB_RESTART_POLICIES = ("Never", "OnFailure")
#: SIGTERM -> checkpoint -> exit needs at least this long
MIN_GRACE_SECONDS = 60
REQUIRED_LABELS = tuple(f"app.kubernetes.io/{part}" for part in ("name", "instance", "component"))


def manifest_problems(objs: Sequence[Manifest]) -> list[str]:
    """Every problem found in one job's manifests, one line each, naming the object.

    Checks: Job and MPIJob-launcher restart policies; no ranks run as a Deployment's (or
    ReplicaSet's, ReplicationController's, DaemonSet's) pods, and a bare Pod's rank is rank 0 of
    1 and not restarted (a bare Pod that runs a rank or a shard is held to every check of
    their pods' templates); each ``subdomain`` and ``serviceName``
    names a headless Service of the job whose selector matches the pods; the shards start
    together and are named in DNS before they are ready; ``mpirun -np`` fits in
    the MPIJob's worker slots, and its ranks' ``--timeout`` is below their ``--stall-seconds``
    where the worker pods' liveness asks their ``/healthz``;
    an MPIJob whose ranks run ``distconv train`` and whose worker pods start this image's sshd
    (its ``-f /home/distconv/.sshd_config``) sets ``mpiImplementation: MPICH`` and
    ``sshAuthMountPath`` to the image's ``~/.ssh`` (the operator's defaults would start every
    rank in the launcher pod, and no worker's sshd); an MPIJob's ``-np`` leaves no worker pod
    idle where mpirun fills each pod's slots in order (no ``-ppn`` or ``-rr``); no rank's
    thread variables
    (``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``,
    ``DISTCONV_NUM_THREADS``; an MPIJob's are its launcher's, which mpirun hands its ranks) ask
    more threads than the CPUs its container's limit gives each rank;
    ``--pservers`` (and ``DISTCONV_PSERVERS``) list exactly the
    StatefulSet's DNS names in ordinal order and ``--num-shards`` its replicas; ``--workers``
    equals the worker Job's completions (an Indexed Job's, whose index gives each rank and
    which needs completions; its ranks' ``DISTCONV_WORLD_SIZE`` equals them too, unless the
    ranks give ``--world-size``, which wins over it; a Job that is not Indexed runs one rank,
    which takes no ``DISTCONV_WORLD_SIZE`` above 1; a rank whose command line drops the index
    (``env -i``, ``env -u``) is rank 0 of 1 unless a launcher's pair places it; such a pair
    (``RANK``/``WORLD_SIZE``, ``PMI_*``, ``OMPI_COMM_WORLD_*``), with the index or without it,
    is judged as the runtime reads it: both set, integers, each pod's own rank, the Job's size;
    a rank given ``--rank`` and ``--world-size`` reads neither the index nor the variable), and
    an MPIJob launcher's ``DISTCONV_WORLD_SIZE`` its ``-np``
    (but for ranks given both flags); ``--sync pserver`` has its servers (``--pservers`` or
    ``DISTCONV_PSERVERS``); the conventions every pod keeps (labels, non-root, resources,
    grace period, probes on the health port, keys mounted as files only); every
    ``distconv train`` resumes (``--resume auto``), takes no flag of another transport than
    its ``--sync``, and writes ``--out`` onto a writable volume of the pods its ranks run in;
    no ``--rank``, ``--world-size`` or ``--job-id`` written into the ranks' arguments disagrees
    with the pods (one rank for all, another count, a job id the shards do not serve, asked
    only of ranks that reach them: a ``--sync local`` or ``mpi`` baseline keeps its own);
    every ``distconv pserver`` command line parses with the shard's own parser (``$(VAR)``
    filled in as the kubelet does; in an init container, which need only exit 0, ``--help``
    passes, and no check asks it what a shard or a rank must do), takes its ``--shard`` from
    its pod where the StatefulSet has several replicas, and a shard's
    ``--checkpoint-dir`` lies on a writable volume of its container and its ``--bind`` is not
    loopback, which no worker in another pod reaches; the shards' ``--timeout`` (written, or
    their default) is the workers' beside them (written, or theirs), in a job of two workers
    or more (shards that outwait the workers' wait, 1.5 x theirs, named in the words each
    worker warns with at setup), and no workers' ``--timeout`` is below a shard's least
    (0.2 s); beside shards that agree with them, a worker's startup probe holds liveness off
    for longer than its wait for ranks late to the start-up job check (10 rounds of the
    shards' ``--timeout``; a render gives twice that, at least 1200 s); a pod whose ranks train on
    GPUs requests exactly one GPU per rank (an MPI worker pod: one per slot) and gives CuPy's kernel
    cache (``CUPY_CACHE_DIR``) a writable volume; shards and workers mount
    different key Secrets; and an MPI worker pod waits for its ranks in a preStop hook, with no
    readiness or startup gate; a CronJob whose Job runs them lets no two runs overlap
    (``concurrencyPolicy: Forbid`` or ``Replace``); every image of a pod that runs a shard, a
    rank or sshd is one the kubelet can parse, and one job's shards and the workers that reach
    them (an MPIJob's Launcher and Worker, where its workers run this image's sshd) run one
    image.

    Raises :class:`ValueError` for a document the checks cannot read (one that holds itself,
    nests too deep or expands too far: :func:`~distconv.deploy.bounds.refuse_unreadable`).
    """
    objs, problems = applied_objects(objs)
    for check in (
        count_problems,
        _restart_policies,
        _rank_controllers,
        _services_named,
        _shards_start_together,
        _mpi_slots,
        _mpi_timeouts,
        _mpi_launch_settings,
        thread_problems,
        _server_lists,
        _worker_counts,
        _conventions,
        _mpi_liveness_ports,
        _train_runs,
        _pod_settings,
        _shard_args,
        timeout_problems,
        _rank_gpus,
        _split_secrets,
        overlapping_runs,
        image_problems,
    ):
        problems.extend(check(objs))
    return problems


def _restart_policies(objs: Sequence[Manifest]) -> Iterator[str]:
    for job in _of_kind(objs, "Job"):
        policy = job.get("spec", {}).get("template", {}).get("spec", {}).get("restartPolicy")
        if policy not in JOB_RESTART_POLICIES:
            yield f"{_where(job)}: restartPolicy must be Never or OnFailure, got {policy!r}"
    for mpijob in _of_kind(objs, "MPIJob"):
        launcher = mpijob.get("spec", {}).get("mpiReplicaSpecs", {}).get("Launcher", {})
        for policy in (launcher.get("restartPolicy"), _pod(launcher).get("restartPolicy")):
            if policy is not None and policy not in JOB_RESTART_POLICIES:
                yield (
                    f"{_where(mpijob)} Launcher: restartPolicy must be Never or OnFailure, "
                    f"got {policy!r}"
                )
        yield from _mpi_worker_restarts(mpijob)


def _mpi_worker_restarts(mpijob: Manifest) -> Iterator[str]:
    """The operator's validation takes only Never or OnFailure on a replica (``Always`` and
    ``ExitCode`` too leave the MPIJob unstarted, with an event alone saying why). A worker pod
    whose liveness probe fails under Never goes Failed, and the operator creates a worker pod
    only where none exists: the launcher's retries cannot reach that host, and the MPIJob fails
    before distconv's own --timeout could stop and resume it."""
    worker = mpijob.get("spec", {}).get("mpiReplicaSpecs", {}).get("Worker", {})
    policy = worker.get("restartPolicy")
    if policy is not None and policy not in JOB_RESTART_POLICIES:
        yield (
            f"{_where(mpijob)} Worker: restartPolicy must be Never or OnFailure, got {policy!r} "
            "(the MPI operator refuses the MPIJob)"
        )
        return
    if policy != "OnFailure" and any(
        "livenessProbe" in c for c in _pod(worker).get("containers", [])
    ):
        yield (
            f"{_where(mpijob)} Worker: restartPolicy {policy or 'Never (unset)'} with a "
            "livenessProbe: a liveness failure leaves the pod Failed, which the operator never "
            "recreates, and the MPIJob fails (use OnFailure: the container restarts in its pod)"
        )


#: controllers whose pods have no Job index nor stable ordinal and are restarted when they exit
RESTARTING_CONTROLLERS = ("Deployment", "ReplicaSet", "ReplicationController", "DaemonSet")


def _rank_controllers(objs: Sequence[Manifest]) -> Iterator[str]:
    """Ranks run as a Deployment's (ReplicaSet's, ...) pods: no placement serves them. Their
    pods share one env and are named ``<name>-<hash>-<random>`` (no index, no ordinal), so
    every pod takes the same rank, and a rank that finishes is started again, for ever. A bare
    Pod runs one rank: it must place itself as rank 0 of 1 (:func:`by_ordinal`, by its host
    name), and not be started again when it finishes (its restartPolicy, Always unset)."""
    for obj in {id(o): o for o, *_ in _running(objs, "train")}.values():  # once each
        if obj.get("kind") in RESTARTING_CONTROLLERS:
            yield (
                f"{_where(obj)}: runs distconv train, but a {obj['kind']}'s pods have no Job "
                "index nor ordinal to take a rank from, and each is started again when its "
                "rank finishes (run the ranks as an Indexed Job)"
            )
    for pod in _of_kind(objs, "Pod"):
        spec = pod.get("spec") or {}
        ranks = [c for c in _main_containers({"spec": spec}) if _runs(c, "train")]
        host = str(spec.get("hostname") or pod_hostname(object_name(pod)))
        for problem in filter(
            None, (by_ordinal(c, lambda _, host=host: host, 1, range(1)) for c in ranks)
        ):
            yield f"{_where(pod)}: {problem} (a bare Pod runs one rank: rank 0 of 1)"
        policy = spec.get("restartPolicy", "Always")
        if ranks and policy not in JOB_RESTART_POLICIES:
            yield (
                f"{_where(pod)}: restartPolicy must be Never or OnFailure, got {policy!r}"
                f"{' (unset)' if 'restartPolicy' not in spec else ''}: its rank would be "
                "started again each time it finishes"
            )


def _conventions(objs: Sequence[Manifest]) -> Iterator[str]:
    for obj in objs:
        yield from _labels(_where(obj), obj)
        health_ports = _health_ports(obj)
        for where, template in _templates(obj):
            if obj.get("kind") != "Pod":  # a bare Pod's labels are its own, named above
                yield from _labels(f"{where} pod template", template)
            ours = runs_the_jobs_processes(template)  # a dashboard beside them: not held
            yield from _pod_conventions(where, template, health_ports, ours)


def _labels(where: str, node: Manifest) -> Iterator[str]:
    yield from filter(None, [metadata_problem(where, node)])
    labels = metadata_of(node).get("labels", {})
    for key in REQUIRED_LABELS:
        if not labels.get(key):
            yield f"{where}: label {key} is missing"


def _health_ports(obj: Manifest) -> set[int]:
    """Container ports named "health" anywhere in the object (MPI ranks run on the workers)."""
    return {
        p["containerPort"]
        for _, template in _templates(obj)
        for c in _containers(template)
        for p in c.get("ports", [])
        if p.get("name") == "health"
    }


def _pod_conventions(
    where: str, template: Manifest, health_ports: set[int], of_the_job: bool
) -> Iterator[str]:
    """The conventions a pod keeps; the grace period and the probes only where
    ``of_the_job`` (:func:`~distconv.deploy.programs.runs_the_jobs_processes`)."""
    pod = template.get("spec", {})
    security = pod.get("securityContext", {})
    if security.get("runAsNonRoot") is not True or not security.get("runAsUser"):
        yield f"{where}: the pod must set runAsNonRoot: true and a numeric non-zero runAsUser"
    grace = pod.get("terminationGracePeriodSeconds", 30)
    if not counted(pod, "terminationGracePeriodSeconds"):  # "90": kubectl refuses it
        yield f"{where}: terminationGracePeriodSeconds must be an integer, got {grace!r}"
    elif of_the_job and grace < MIN_GRACE_SECONDS:
        yield f"{where}: terminationGracePeriodSeconds {grace} < {MIN_GRACE_SECONDS} s"
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for container in _containers(template):
        yield from _container_conventions(_here(where, container), container, volumes)
    if not of_the_job:  # no shard, no rank: nothing checkpoints, nothing serves the probes
        return
    # an init container runs to completion before the pod is up: Kubernetes takes no probe on it
    for container in _main_containers(template):
        yield from _probe_problems(_here(where, container), container, health_ports)


def _container_conventions(here, container, volumes) -> Iterator[str]:
    if container.get("securityContext", {}).get("allowPrivilegeEscalation") is not False:
        yield f"{here}: allowPrivilegeEscalation must be false"
    resources = container.get("resources", {})
    for part in ("requests", "limits"):
        for kind in ("cpu", "memory"):
            if kind not in resources.get(part, {}):
                yield f"{here}: resources.{part}.{kind} is missing"
    yield from _key_problems(here, container, volumes)


def _key_problems(here, container, volumes) -> Iterator[str]:
    for var in container.get("env", []):
        if "secretKeyRef" in var.get("valueFrom", {}):
            yield f"{here}: env {var['name']} comes from a Secret; keys travel as files only"
    if any("secretRef" in source for source in container.get("envFrom", [])):
        yield f"{here}: envFrom a Secret; keys travel as files only"
    keys = _flag(_argv(container), "--keys", last=True)
    keys = None if keys is None else expand(keys, container)  # as the kubelet passes it
    if keys is None or _is_filled(keys):  # none, or only the cluster knows it: not judged
        return
    path = in_container(keys, container.get("workingDir"))
    known, env = env_as_seen(container, "DISTCONV_KEYS")
    # a shard reads its keys from --keys alone: it needs no DISTCONV_KEYS (one set must agree)
    needed = env is not None or not _runs(container, "pserver")
    if known and needed and (env is None or in_container(env, container.get("workingDir")) != path):
        yield f"{here}: DISTCONV_KEYS must be {keys!r}, the --keys directory"
    mounted = {
        posixpath.normpath(m["mountPath"]): volumes.get(m["name"], {})
        for m in container.get("volumeMounts", [])
    }
    if "secret" not in mounted.get(path, {}):
        shown = keys if keys == path else f"{keys} ({path})"  # a relative one: where it lands
        yield f"{here}: --keys {shown} is not a mounted Secret volume"


def _secret_names(template: Manifest) -> set[str]:
    volumes = template.get("spec", {}).get("volumes", [])
    return {v["secret"].get("secretName") for v in volumes if "secret" in v} - {None}


def _split_secrets(objs: Sequence[Manifest]) -> Iterator[str]:
    """Shards never mount the workers' secret keys, workers never the server's."""
    shards = {n for s in _of_kind(objs, "StatefulSet") for n in _secret_names(_template(s))}
    for job in _of_kind(objs, "Job"):
        shared = shards & _secret_names(_template(job))
        if shared:
            yield (
                f"{_where(job)}: mounts the shards' Secret {sorted(shared)}; workers must not "
                "hold the server's secret key"
            )
