"""Checks on what the training ranks need from the pods they run in: a restart resumes, the run
directory is writable, ranks on GPUs each have a device and a writable kernel cache, and no flag
overrides the rank, world size or job id the pods give (part of
:func:`distconv.deploy.check.manifest_problems`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from distconv.deploy.check_shards import _is_filled, env_as_seen, expand, shard_flag
from distconv.deploy.counts import count, counted, known_count
from distconv.deploy.pod import HOME
from distconv.deploy.train_values import train_values_problem, without_unknown
from distconv.deploy.walk import (
    Manifest,
    _argv,
    _digits,
    _flag,
    _here,
    _pod,
    _process_counts,
    _running,
    _runs,
    _templates,
    _where,
    _writable,
    spec_of,
)
from distconv.runtime import DEFAULT_JOB_ID, ENV_JOB_ID, INTEGER_TEXT
from distconv.train_args import FlagError, spelled_out
from distconv.transport_flags import unused_flag

#: the extended resource the NVIDIA device plugin schedules
GPU_RESOURCE = "nvidia.com/gpu"
#: where CuPy caches the kernels it compiles, without CUPY_CACHE_DIR: the image user's home
CUPY_DEFAULT_CACHE = f"{HOME}/.cupy/kernel_cache"
CACHE_NAME = "CuPy's kernel cache (CUPY_CACHE_DIR)"


def _rank_pods(obj: Manifest, where: str, template: Manifest) -> list[tuple[str, Manifest]]:
    """(where, pod template) of the pods whose ranks run the command of ``template``."""
    if obj.get("kind") == "MPIJob" and where.endswith(" Launcher"):
        return [(w, t) for w, t in _templates(obj) if w.endswith(" Worker")]
    return [(where, template)]


def _rank_containers(
    obj: Manifest, where: str, template: Manifest, container: Manifest
) -> list[tuple[str, Manifest]]:
    """(where, the pod template with only the containers the ranks of ``container`` run in):
    that container itself, or under an MPIJob the worker pods' containers that run sshd, which
    starts the ranks (all of them where none says so). A sidecar beside them (a log shipper)
    writes no run directory and needs none of their volumes."""
    if obj.get("kind") != "MPIJob" or not where.endswith(" Launcher"):
        return [(where, {"spec": {"containers": [container]}})]
    pods = []
    for pod_where, pod in _rank_pods(obj, where, template):
        every = pod.get("spec", {}).get("containers", [])
        sshd = [c for c in every if _runs(c, "sshd")]
        pods.append((pod_where, {"spec": {"containers": sshd or every}}))
    return pods


def _ranks_per_pod(obj: Manifest, where: str) -> int:
    """How many ranks one pod at ``where`` runs: an MPI worker pod's slots, else one."""
    if obj.get("kind") == "MPIJob" and where.endswith(" Worker"):
        return count(obj.get("spec", {}), "slotsPerWorker", 1)
    return 1


def _trainers(
    objs: Sequence[Manifest],
) -> Iterator[tuple[Manifest, str, Manifest, Manifest, list[str], FlagError | None]]:
    """(object, where, pod template, container, train arguments as read, the flag error in
    them or None) of every ``distconv train`` that runs for its pod's life, as a rank does.

    An init container is no rank (``distconv train --help``: an image's smoke test), so none of
    the ranks' checks holds for it; nor is it read for flags ``distconv train`` does not take,
    since the flags are read one by one here, not parsed whole, and ``--help`` after a wrong
    flag still exits 0: whether it would fail cannot be told.
    """
    for obj, where, template, container, train in _running(objs, "train"):
        yield obj, where, template, container, *_as_read(train)


def _as_read(train: list[str]) -> tuple[list[str], FlagError | None]:
    """``train`` as the ranks read it, each abbreviated flag written out (``--re`` is
    ``--resume``), and None; as written where a flag is wrong, and why."""
    try:
        return spelled_out(train), None
    except FlagError as exc:
        return train, exc


def _values_refused(container: Manifest, train: list[str]) -> str | None:
    """Why ``distconv train`` would refuse the values of ``train`` (``--epochs -1``), as the
    kubelet passes them (``$(VAR)`` filled in), or None; not judged where a token holds a value
    only the cluster knows, or a reference it may define (``$(JOB_COMPLETION_INDEX)``): that
    flag is left out (:func:`~train_values.without_unknown`), or the whole where it may be one."""
    argv = without_unknown(
        [expand(a, container) for a in train], lambda a: _is_filled(a) or "$(" in a
    )
    return None if argv is None else train_values_problem(argv)


def _train_runs(objs: Sequence[Manifest]) -> Iterator[str]:
    """Restarted ranks resume, take no flag of another transport than their ``--sync``, and
    every rank can write its run directory."""
    for obj, where, template, container, train, wrong in _trainers(objs):
        here = _here(where, container)
        if wrong is not None:
            yield f"{here}: {wrong}: every rank would refuse it"
            continue
        resume = _passed(container, _flag(train, "--resume", last=True))
        if "--overwrite" in train and any(t.split("=", 1)[0] == "--resume" for t in train):
            yield f"{here}: every rank would refuse --overwrite beside --resume"
        elif "--overwrite" in train or (resume != "auto" and not _is_filled(resume)):
            yield f"{here}: distconv train needs --resume auto, or a restart starts over"
        elif (refused := _values_refused(container, train)) is not None:  # said above if resume
            yield f"{here}: distconv train: {refused}: every rank would refuse it"
            continue
        yield from _unused_flags(here, train)
        yield from _no_servers(here, container, train)
        out = _passed(container, _flag(train, "--out", last=True) or "runs")
        ranks_in = _rank_containers(obj, where, template, container)
        for pod_where, pod in ranks_in if not _is_filled(out) else ():
            yield from _writable(pod_where, pod, out, container.get("workingDir"))


def _passed(container: Manifest, value: str | None) -> str | None:
    """A rank's flag ``value`` as the kubelet passes it: ``$(VAR)`` filled in from the
    container's literal values, a stand-in (:func:`_is_filled`) where only the cluster knows
    it, which no check may judge."""
    return None if value is None else expand(value, container)


def _unused_flags(here: str, train: list[str]) -> Iterator[str]:
    """A flag for another transport than the ``--sync`` the pods run: every rank would refuse
    it at start."""
    from distconv.distributed import TRANSPORT_OPTIONS  # the syncs: a job with a train command

    kind = _flag(train, "--sync", last=True)
    # none given (implied by --pservers or the launcher), or one the shell or Kubernetes
    # fills in (--sync $(SYNC)): nothing to compare the flags with here
    for token in train if kind in TRANSPORT_OPTIONS else ():
        problem = unused_flag(token.split("=", 1)[0], kind) if token.startswith("--") else None
        if problem is not None:
            yield f"{here}: {problem}"


def _no_servers(here: str, container: Manifest, train: list[str]) -> Iterator[str]:
    """``--sync pserver`` needs the shards' addresses: ``--pservers``, else
    ``DISTCONV_PSERVERS`` (a blank one is unset); with neither every rank stops at start
    (``--sync pserver needs the servers``). One the cluster may set is not judged."""
    if _passed(container, _flag(train, "--sync", last=True)) != "pserver":
        return
    known, servers = env_as_seen(container, "DISTCONV_PSERVERS")
    if _flag(train, "--pservers", last=True) is None and known and not (servers or "").strip():
        yield (
            f"{here}: distconv train --sync pserver names no shards (no --pservers, no "
            "DISTCONV_PSERVERS): every rank would refuse to start"
        )


def _device(container: Manifest, train: list[str]) -> str | None:
    """Where the ranks of ``container`` train, as they read it: ``--device``, else
    DISTCONV_DEVICE, else ``"cpu"`` (under MPI the launcher's environment is the ranks', as
    Hydra forwards it); None where the cluster fills it in (``$(VAR)`` of no literal value,
    ``valueFrom``, ``envFrom``), which no check may judge."""
    flag = _flag(train, "--device", last=True)
    if flag is not None:
        known, text = True, expand(flag, container)  # as the kubelet passes it
    else:
        known, text = env_as_seen(container, "DISTCONV_DEVICE")
    if not known or (text is not None and (_is_filled(text) or "$(" in text)):
        return None
    return (text or "").strip().lower() or "cpu"


def _pod_gpus(template: Manifest) -> int:
    """The GPUs a pod gets: its containers' nvidia.com/gpu limits (requests where no limit)."""
    total = 0
    for container in template.get("spec", {}).get("containers", []):
        resources = container.get("resources", {})
        value = resources.get("limits", {}).get(GPU_RESOURCE)
        value = resources.get("requests", {}).get(GPU_RESOURCE) if value is None else value
        total += int(value or 0)
    return total


def _kernel_cache(container: Manifest) -> str | None:
    """Where the GPU ranks of ``container`` have CuPy write the kernels it compiles on first
    use; None where nothing is written (``CUPY_CACHE_IN_MEMORY=1``) or the cluster fills either
    variable in (a cache kept in memory may be the one it sets)."""
    known, in_memory = env_as_seen(container, "CUPY_CACHE_IN_MEMORY")
    if not known or _cupy_flag(in_memory):  # on, or maybe on: nothing on disk to judge
        return None
    known, cache = env_as_seen(container, "CUPY_CACHE_DIR")
    if not known or "$(" in (cache or ""):  # a reference the kubelet leaves: not judged
        return None
    return cache or CUPY_DEFAULT_CACHE


def _cupy_flag(value: str | None) -> bool:
    """An on/off variable as CuPy reads it (``_get_bool_env_variable``): on where its value is
    an integer equal to 1 (``1``, `` 1``, ``01``), off otherwise."""
    try:
        return value is not None and int(value) == 1
    except ValueError:
        return False


def _rank_gpus(objs: Sequence[Manifest]) -> Iterator[str]:
    """Each GPU rank of a pod needs its own device (local rank R uses CUDA device R), and a
    writable directory for CuPy's kernel cache, or its first operation fails; a pod requests
    no more GPUs than its ranks use (the others would sit idle, held from other jobs), and none
    where its ranks train on the CPU (``--gpus 1 -- --device cpu``)."""
    for obj, where, template, container, train, _ in _trainers(objs):
        device = _device(container, train)
        if device != "gpu":
            # a device the cluster fills in may be the GPU the pod requests: not judged
            for pod_where, pod in _rank_pods(obj, where, template) if device == "cpu" else ():
                if _pod_gpus(pod):
                    yield (
                        f"{pod_where}: the pod requests {_pod_gpus(pod)} {GPU_RESOURCE} but its "
                        "ranks train on the CPU: drop the request, or train with --device gpu"
                    )
            continue
        cache = _kernel_cache(container)
        for pod_where, pod in _rank_pods(obj, where, template):
            ranks, gpus = _ranks_per_pod(obj, pod_where), _pod_gpus(pod)
            if gpus < ranks:
                yield (
                    f"{pod_where}: {ranks} rank(s) per pod train on GPUs but the pod requests "
                    f"only {gpus} {GPU_RESOURCE}; each rank needs a device of its own"
                )
            # no ranks (slotsPerWorker 0), or a count that is no int32, which read as 1: the
            # count's own line, not a pod of one rank with GPUs to spare
            elif gpus > ranks >= 1 and counted(obj.get("spec", {}), "slotsPerWorker"):
                yield (
                    f"{pod_where}: {ranks} rank(s) per pod train on GPUs but the pod requests "
                    f"{gpus} {GPU_RESOURCE}; each rank uses one device, so {gpus - ranks} would "
                    f"sit idle: request {ranks}"
                )
        ranks_in = _rank_containers(obj, where, template, container)
        for pod_where, pod in ranks_in if cache is not None else ():
            workdir = container.get("workingDir")
            yield from _writable(pod_where, pod, cache, workdir, CACHE_NAME)


def _pod_settings(objs: Sequence[Manifest]) -> Iterator[str]:
    """A ``--rank``, ``--world-size`` or ``--job-id`` written into a rank's arguments wins over
    what its pod gives it (the Job index, MPI, ``DISTCONV_JOB_ID``): one rank claimed by every
    pod, a world size the job does not run, or a job id its shards do not serve fails or hangs
    every rank. Each is read as the kubelet passes it (``$(VAR)`` filled in); one it fills in
    per pod is left alone, as are counts the manifests do not say. A rank that never reaches
    the shards (``--sync local`` or ``mpi``, a baseline beside the job) says them no hello: its
    job id is its own, as the count checks leave it out of the shards' world."""
    from distconv.deploy.programs import trains_with_the_shards  # via index_reads, imports this

    shards = _shard_job_ids(objs)
    for obj, where, _, container, train, wrong in _trainers(objs):
        if wrong is not None:  # named by _train_runs
            continue
        here, size = _here(where, container), _world_size(obj)
        rank, given = (
            _written(container, train, "--rank"),
            _written(container, train, "--world-size"),
        )
        if rank is not None and size is not None and size > 1:
            yield (
                f"{here}: --rank {rank} is in every rank's arguments, so the {size} ranks of "
                f"{_where(obj)} would all claim it (each gets its own from the pods)"
            )
        elif size == 1 and _out_of_one(rank, given):
            # placed by the flag or not, its world is one rank (it stops, out of range), or
            # one more (a DISTCONV_WORLD_SIZE named on its own: it waits for a rank 0)
            yield (
                f"{here}: --rank {rank} but {_where(obj)} runs 1 rank, rank 0: it would "
                "refuse to start (out of range), or wait for a rank 0 that never starts"
            )
        if given is not None and size is not None and _other_count(given, size):
            yield f"{here}: --world-size {given} but {_where(obj)} runs {size} ranks"
        # --rank with --world-size: the ranks read neither from their environment
        flags = all(_flag(train, f, last=True) is not None for f in ("--rank", "--world-size"))
        if obj.get("kind") == "MPIJob" and size is not None and not flags:
            yield from _mpi_world_size_var(here, container, size)
        mine = _rank_job_id(container, train)
        for shard_where, theirs in shards if trains_with_the_shards(container) else ():
            if None not in (mine, theirs) and mine[0] != theirs[0]:
                yield (
                    f"{here}: job id {mine[0]!r} ({mine[1]}) but {shard_where} serves "
                    f"{theirs[0]!r} ({theirs[1]}): the shards would refuse every worker's hello"
                )


def _out_of_one(rank: str | None, given: str | None) -> bool:
    """Whether ``--rank rank`` is out of range for the world of one rank a job of one gives
    (``--world-size given``, where written, says 1 too: another is named on its own)."""
    one = given is None or not _other_count(given, 1)
    return one and rank is not None and bool(INTEGER_TEXT.fullmatch(rank)) and int(rank) > 0


def _mpi_world_size_var(here: str, container: Manifest, size: int) -> Iterator[str]:
    """An MPIJob's ranks get the launcher's environment, which Hydra forwards: a
    ``DISTCONV_WORLD_SIZE`` there must be mpirun's ``-np``, which each rank reads from PMI, or
    every rank stops (``two sources disagree about the world size``), as at a ``$(`` the
    kubelet left as written (the rank reads the text). One the cluster fills in is not judged."""
    from distconv.deploy.index_reads import why_left  # which imports this module

    known, value = env_as_seen(container, "DISTCONV_WORLD_SIZE")
    if known and value is not None and _other_count(value, size):
        yield (
            f"{here}: DISTCONV_WORLD_SIZE {value!r} but mpirun starts {size} ranks (-np): "
            f"every rank would refuse to start{why_left(value)}"
        )


def _written(container: Manifest, argv: list[str], name: str) -> str | None:
    """The value of flag ``name`` in ``argv`` as the kubelet passes it, ``$(VAR)`` filled in
    from ``container``'s values; None where it is not given, only the cluster knows it, or it
    refers to a variable the manifest does not define (``--rank $(JOB_COMPLETION_INDEX)``,
    which the Job controller adds to each pod)."""
    value = _passed(container, _flag(argv, name, last=True))
    return None if value is None or _is_filled(value) or "$(" in value else value


def _other_count(given: str, size: int) -> bool:
    """Whether ``--world-size given`` (or ``DISTCONV_WORLD_SIZE``) is another count than
    ``size`` as the ranks read it (``04`` and `` +4`` are 4); a value they cannot read as a
    number is one too (``1_0`` and ``١٠``, which ``int()`` reads as 10, the ranks refuse)."""
    return not INTEGER_TEXT.fullmatch(given) or int(given) != size


def _world_size(obj: Manifest) -> int | None:
    """How many ranks ``obj`` runs, where its manifest says: a Job's completions, an MPIJob
    launcher's ``-np``; None for another kind, a count the cluster fills in or one that is no
    integer (:func:`~distconv.deploy.counts.count_problems` names it)."""
    spec = spec_of(obj)
    if obj.get("kind") == "Job":
        completions = known_count(spec, "completions", 1)  # None: no integer, not judged
        return None if completions is None else completions or 1
    if obj.get("kind") == "MPIJob":
        launcher = _pod(spec.get("mpiReplicaSpecs", {}).get("Launcher", {}))
        for container in launcher.get("containers", []):
            counts = [expand(c, container) for c in _process_counts(_argv(container))]
            if len(counts) == 1 and _digits(counts[0]):  # others are _mpi_slots' to name
                return int(counts[0])
    return None


def _job_id(container: Manifest, given: bool, flag: str | None) -> tuple[str, str] | None:
    """(the job id a ``distconv train`` or ``pserver`` in ``container`` uses, where it comes
    from), as both read it: ``--job-id`` where ``given`` (``flag``, its value; an empty one
    is none given, :func:`~distconv.runtime.job_id_from`), else ``DISTCONV_JOB_ID``, else the
    default; None where the cluster fills it in (``$(VAR)``, ``valueFrom``, ``envFrom``)."""
    if given and flag != "":
        return None if flag is None else (flag.strip(), "--job-id")
    known, value = env_as_seen(container, ENV_JOB_ID)  # $(VAR) filled in as the kubelet does
    if not known:  # a valueFrom, or an envFrom (a ConfigMap or Secret) that may set it
        return None
    if not value:  # both read an empty one as none
        return DEFAULT_JOB_ID, f"the default, without {ENV_JOB_ID}"
    return None if "$(" in value else (value.strip(), ENV_JOB_ID)


def _rank_job_id(container: Manifest, train: list[str]) -> tuple[str, str] | None:
    """:func:`_job_id` of a rank with the (spelled out) ``train`` arguments."""
    given = _flag(train, "--job-id", last=True) is not None
    return _job_id(container, given, _written(container, train, "--job-id"))


def _shard_job_ids(objs: Sequence[Manifest]) -> list[tuple[str, tuple[str, str] | None]]:
    """(where, job id as :func:`_job_id` gives it) of every shard the job runs, its flag read
    as the shard's own parser reads it (``--job`` is ``--job-id``)."""
    return [
        (_here(where, container), _job_id(container, *shard_flag(args, container, "job_id")))
        for _, where, _, container, args in _running(objs, "pserver")
    ]
