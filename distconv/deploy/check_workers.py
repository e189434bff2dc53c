"""The checks of how many ranks a job runs (part of
:func:`distconv.deploy.check.manifest_problems`; an MPIJob's slots are
:mod:`distconv.deploy.check_mpi`'s): an Indexed Job has completions, equal to its ranks'
``DISTCONV_WORLD_SIZE`` (which ranks given both ``--rank`` and ``--world-size`` do not read)
and the shards' ``--workers``; a Job that is not Indexed runs one rank. A count field that
is no integer is named by :func:`~distconv.deploy.counts.count_problems` alone: nothing is
compared with it here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from distconv.deploy.check_index import _pair_problems, index_rank_problems
from distconv.deploy.check_ordinals import by_ordinal, ordinal_hosts
from distconv.deploy.check_shards import _is_filled, env_as_seen, expand, shard_flag
from distconv.deploy.counts import count, counted, judged_pods, known_count
from distconv.deploy.index_reads import (
    EACH_INDEX,
    INDEX,
    INDEX_NAME,
    _index_removed,
    _pairs,
    _seen,
    _train_args,
    placed_by,
    refused_alone,
    why_left,
)
from distconv.deploy.programs import trains_with_the_shards, unknown_transports
from distconv.deploy.shell import KUBELET_REFERENCE
from distconv.deploy.walk import (
    Manifest,
    _argv,
    _command_args,
    _flag,
    _here,
    _main_containers,
    _of_kind,
    _running,
    _runs,
    _template,
    _templates,
    _where,
    object_name,
    spec_of,
)
from distconv.placement import ENV_RANK_FROM_HOSTNAME, ENV_WORLD_SIZE


def _shard_setting(container: Manifest, dest: str) -> str | None:
    """The value a ``distconv pserver`` run by ``container`` reads for its flag ``dest``
    (abbreviated, ``$(VAR)`` filled in, ``--workers 04`` as 4); None where the container runs
    no shard, the flag is not given or only the cluster knows its value."""
    args = _command_args(_argv(container), "pserver")
    return None if args is None else shard_flag(args, container, dest)[1]


def _job_pods(spec: Manifest) -> int:
    # without completions a Job runs its parallelism's pods at once (a work queue), each a rank
    parallelism = count(spec, "parallelism", 1)
    return count(spec, "completions", parallelism)


def _worker_counts(objs: Sequence[Manifest]) -> Iterator[str]:
    jobs = [j for j in _of_kind(objs, "Job") if spec_of(j).get("completionMode") == "Indexed"]
    yield from _flag_references(objs, jobs)
    yield from _one_workers_job(objs)
    yield from _stateful_ranks(objs)
    # ranks of another Job get no JOB_COMPLETION_INDEX, nor any other per-pod number
    workers = _workers(objs)
    for job in {id(o): o for o, *_ in _running(objs, "train")}.values():
        yield from _ranks_a_pod(job) if job.get("kind") in ("Job", "StatefulSet", "Pod") else ()
        if job.get("kind") == "Pod" and workers == [job]:  # two: _one_workers_job's
            yield from _shards_serve(objs, job, 1)  # a bare Pod runs rank 0 of 1
        if job.get("kind") != "Job" or job in jobs:
            continue
        if _job_pods(spec_of(job)) > 1:
            yield (
                f"{_where(job)}: completionMode must be Indexed: the ranks take theirs from "
                "JOB_COMPLETION_INDEX, which only an Indexed Job sets (every rank would exit)"
            )
        else:
            yield from _one_rank_job(objs, job, shards=not jobs)
    for job in jobs:
        spec = spec_of(job)
        if "completions" not in spec:  # the ranks' count: nothing to compare with
            yield (
                f"{_where(job)}: completionMode Indexed needs completions, the number of "
                "ranks (the API server refuses the Job without it)"
            )
            continue
        # a count that is no integer is count_problems' to name: nothing is compared with it
        completions, counts = known_count(spec, "completions", None), counted(spec, "completions")
        if counts and counted(spec, "parallelism"):
            yield from _all_at_once(job, completions)
        # the ranks: an init container (a smoke test) or a sidecar that runs no distconv train
        # (a log shipper) runs no rank and needs no world size
        for container in _main_containers(_template(job)):
            if not _runs(container, "train"):  # however started: sh -c, distconv -q train
                continue
            yield from _world_size_reference(job, container, indexed=True)
            if placed_by(container, "--rank") and placed_by(container, "--world-size"):
                continue  # the rank reads neither the index nor the variable: _pod_settings'
            yield from index_rank_problems(job, container, completions)
        yield from _shards_serve(objs, job, completions) if counts else ()


def _shards_serve(objs: Sequence[Manifest], workers: Manifest, ranks: int | None) -> Iterator[str]:
    """The shards' ``--workers`` against the ``ranks`` that ``workers`` runs where they are the
    shards' (:func:`_workers`); None: a count named by count_problems, compared with nothing."""
    theirs = ranks is not None and any(w is workers for w in _workers(objs))
    for sts in _of_kind(objs, "StatefulSet") if theirs else ():
        for container in _main_containers(_template(sts)):
            served = _shard_setting(container, "workers")
            if served is not None and served != str(ranks):
                yield (
                    f"{_where(sts)}: --workers {served} but {_where(workers)} runs {ranks} "
                    f"rank{'' if ranks == 1 else 's'}"
                )


def _workers(objs: Sequence[Manifest]) -> list[Manifest]:
    """The Jobs and the bare Pods whose pods run ranks (``distconv train``) of the shards' one
    world, once each: each places its ranks from rank 0 of it. A rank of another transport (a
    baseline beside the job: :func:`~distconv.deploy.programs.trains_with_the_shards`) is not."""
    running = {
        id(o): o
        for o, _, _, container, _ in _running(objs, "train")
        if trains_with_the_shards(container)
    }
    return [o for o in running.values() if o.get("kind") in ("Job", "Pod")]


def _plural(kinds: set[str]) -> tuple[str, str]:
    """How a line names the workers of ``kinds`` together, and each of them."""
    if len(kinds) > 1:
        return "Jobs and Pods", "of them"
    (kind,) = kinds
    return f"{kind}s", kind


def _one_workers_job(objs: Sequence[Manifest]) -> Iterator[str]:
    """The shards serve one world of ranks (their ``--workers``, one job id): two Jobs or bare
    Pods (each rank 0 of 1), or a Job and a Pod, whose ranks train beside them each place
    their pods as ranks 0..N-1 of it, so every rank would be claimed twice (a job id the
    shards do not serve is named by _pod_settings)."""
    workers = _workers(objs)
    shards = {id(o): o for o, *_ in _running(objs, "pserver") if o.get("kind") == "StatefulSet"}
    if len(workers) > 1 and shards:
        kinds, each = _plural({str(o.get("kind")) for o in workers})
        yield (
            f"{', '.join(map(_where, workers))}: {len(workers)} {kinds} run distconv train "
            f"beside the shards ({', '.join(map(_where, shards.values()))}), whose ranks are one "
            f"world: each rank would be claimed by each {each}"
            f"{unknown_transports(objs, workers)}"
        )


def _stateful_ranks(objs: Sequence[Manifest]) -> Iterator[str]:
    """A StatefulSet's pods share one env and have no Job index: each places itself by its host
    name's ordinal only with ``DISTCONV_RANK_FROM_HOSTNAME`` on, in a world of
    ``DISTCONV_WORLD_SIZE``, which must be its replicas; otherwise (or where a launcher's pair
    or a ``--rank`` written into every pod places it) every pod takes one rank. Each pod's
    placement is worked out as it works it out at start
    (:func:`~distconv.deploy.check_ordinals.by_ordinal`)."""
    fix = (
        f"set {ENV_RANK_FROM_HOSTNAME}=1 and {ENV_WORLD_SIZE} to the replicas, with no "
        "launcher's pair, --rank nor --world-size, or run the ranks as an Indexed Job"
    )
    for sts in {id(o): o for o, *_ in _running(objs, "train")}.values():  # once each
        spec = spec_of(sts)
        replicas = known_count(spec, "replicas", 1) if sts.get("kind") == "StatefulSet" else None
        first = known_count(spec.get("ordinals") or {}, "start", 0)  # spec.ordinals.start
        first = None if first is None or first < 0 else first  # below 0: named, no pod made
        name = object_name(sts)
        for container in _main_containers(_template(sts)) if replicas and first is not None else ():
            hosts, judged = ordinal_hosts(name, first), judged_pods(first, replicas)
            problem = _runs(container, "train") and by_ordinal(container, hosts, replicas, judged)
            if problem:
                start = f"; spec.ordinals.start 0, not {first}" if first else ""
                yield f"{_where(sts)}: {problem} ({fix}{start})"


def _all_at_once(job: Manifest, completions: int | None) -> Iterator[str]:
    """An Indexed Job runs min(parallelism, completions left) pods at once (parallelism 1
    unset): one below ``completions`` starts ranks that wait for ranks that start only after
    them; one above runs every rank at once, as the ranks need."""
    parallelism = count(spec_of(job), "parallelism", 1)
    if completions is not None and parallelism < completions:
        unset = "" if "parallelism" in spec_of(job) else " (unset)"
        yield (
            f"{_where(job)}: parallelism {parallelism}{unset} is below completions "
            f"{completions}: the ranks started would wait for ranks that start only after them "
            "(all ranks run at once)"
        )


def _ranks_a_pod(job: Manifest) -> Iterator[str]:
    """A Job's (StatefulSet's, bare Pod's) pod is one rank: two containers in it that run
    ``distconv train`` see the same ``JOB_COMPLETION_INDEX`` (or host name) and world size, and
    both claim the pod's rank."""
    (_, template), *_ = _templates(job)
    names = [c.get("name") for c in _main_containers(template) if _runs(c, "train")]
    if len(names) > 1:
        yield (
            f"{_where(job)}: {len(names)} containers ({', '.join(map(str, names))}) run distconv "
            "train in each pod, which is one rank: they would claim the same rank (each pod "
            "runs one rank)"
        )


def _one_rank_job(objs: Sequence[Manifest], job: Manifest, shards: bool) -> Iterator[str]:
    """A Job that is not Indexed runs one pod, whose rank has no index: rank 0 of 1, or what
    a launcher's pair it sees says (:func:`one_rank_problems`); with ``shards`` (it is the
    job's only workers' Job), the shards' ``--workers`` must be 1."""
    for container in _main_containers(_template(job)):
        if _runs(container, "train"):  # a sidecar beside it runs no rank
            yield from _world_size_reference(job, container, indexed=False)
            yield from one_rank_problems(job, container)
    yield from _shards_serve(objs, job, 1) if shards else ()


def _world_size_reference(job: Manifest, container: Manifest, indexed: bool) -> Iterator[str]:
    """A ``DISTCONV_WORLD_SIZE`` that reaches the rank in ``container`` of Job ``job`` with
    ``$(JOB_COMPLETION_INDEX)`` left as written (in the pod's env, or in a Job that is not
    Indexed): the rank reads the text and refuses it (``placement.env_int``); and the index on
    the command line of an
    ``indexed`` Job's pods, each rank's index as its world, which it refuses (out of range, or
    another size than its pair's) unless it keeps the index, sees no pair and gives
    ``--world-size``, which wins. A rank that reads no such variable (both ``--rank`` and
    ``--world-size``; one of them with no index nor pair) is not judged, nor one the cluster
    fills in. The other checks leave such a value alone."""
    known, size = _seen(container, ENV_WORLD_SIZE, indexed)
    pairs = _pairs(container, indexed)
    if not known or size is None or pairs is None or not (size == EACH_INDEX or "$(" in size):
        return
    index = indexed and not _index_removed(container)
    rank, world = placed_by(container, "--rank"), placed_by(container, "--world-size")
    if (rank and world) or (not (index or pairs) and (rank or world)):
        return  # reads none
    if size != EACH_INDEX:
        yield (
            f"{_where(job)}: DISTCONV_WORLD_SIZE {size!r} reaches the ranks as written, and "
            f"they read it: {_REFUSED}{why_left(size)}"
        )
    elif not (index and not pairs and world):
        each = f"DISTCONV_WORLD_SIZE {INDEX} makes each rank's index its world size"
        yield f"{_where(job)}: {each}: {_REFUSED}"


#: how a problem ends where no rank starts
_REFUSED = "every rank would refuse to start"


def _flag_references(objs: Sequence[Manifest], indexed: list[Manifest]) -> Iterator[str]:
    """A ``--rank`` or ``--world-size`` that reaches a rank with a ``$(VAR)`` in it, as the
    kubelet passes it (:func:`_as_passed`): one no variable fills in (the Job index outside an
    Indexed Job, a name the pod does not define, ``$$(...)``), which the rank refuses; and
    the index as the world size, which puts every rank out of range. One the cluster fills
    in (``valueFrom``, ``envFrom``) is not judged."""
    for obj, where, _, container, _ in _running(objs, "train"):
        here, train = _here(where, container), _train_args(container)
        for name in ("--rank", "--world-size"):
            written = _flag(train, name, last=True)
            has_index = any(obj is job for job in indexed)
            passed = None if written is None else _as_passed(written, container, has_index)
            if passed is None or _is_filled(passed):
                continue
            referred = INDEX_NAME in KUBELET_REFERENCE.findall(written)
            if not has_index and referred and INDEX in passed:  # the name the pod lacks
                yield (
                    f"{here}: {name} {written} reaches every rank as written, as the kubelet "
                    f"fills in {INDEX} only in an Indexed Job's pods: every rank would refuse "
                    f"it ({_index_fix(obj)})"
                )
            elif "$(" in passed:
                yield (
                    f"{here}: {name} {written} reaches every rank as {passed!r} (no variable of "
                    "its pod fills it in): every rank would refuse it"
                )
            elif name == "--world-size" and passed.strip() == _EACH_INDEX:
                yield (
                    f"{here}: --world-size {written} makes each rank's index its world size: "
                    "every rank would refuse to start"
                )


#: what :func:`_as_passed` fills the Job index in with: each pod's own, which no check reads as
#: a value only the cluster knows (:func:`_is_filled`) nor as a reference left as written
_EACH_INDEX = "\x01index"


def _as_passed(written: str, container: Manifest, has_index: bool) -> str:
    """A flag's value ``written`` as the kubelet passes it (:func:`expand`), where the pod
    ``has_index``: with ``$(JOB_COMPLETION_INDEX)`` filled in with :data:`_EACH_INDEX`, as the
    Job controller adds the variable after the pod's env (and not where the pod defines it:
    then the controller adds none)."""
    env = container.get("env", [])
    if has_index and not any(var.get("name") == INDEX_NAME for var in env):
        container = {**container, "env": [*env, {"name": INDEX_NAME, "value": _EACH_INDEX}]}
    return expand(written, container)


def _index_fix(obj: Manifest) -> str:
    """What to do about a rank flag that names the Job index, where ``obj`` runs the rank."""
    if obj.get("kind") == "Job":
        return f"set completionMode: Indexed on {_where(obj)}"
    if obj.get("kind") == "MPIJob":
        return "mpirun gives each rank its own: drop the flag"
    return "run the ranks in an Indexed Job"


def one_rank_problems(job: Manifest, container: Manifest) -> Iterator[str]:
    """What stops the rank that ``container`` runs in the one pod of ``job``, a Job that is
    not Indexed, as it places itself at start: with no index, a launcher's pair it sees is
    judged as in an Indexed Job whose ranks lose theirs (its world is 1 rank); with none,
    it is rank 0 of 1, which refuses a ``DISTCONV_WORLD_SIZE`` above 1 (or one it cannot
    read), unless its ``--rank`` or ``--world-size`` places it (then the variable is not
    read: _pod_settings judges the flag). One the cluster fills in is not judged."""
    if placed_by(container, "--rank") and placed_by(container, "--world-size"):
        return  # reads no variable at all
    pairs = _pairs(container, indexed=False)
    known, size = env_as_seen(container, ENV_WORLD_SIZE)
    if pairs:
        runs = "but the Job is not Indexed: it runs 1 rank"
        yield from _pair_problems(
            job, container, pairs, size, 1, index=False, runs=runs, indexed=False
        )
    elif pairs is None or not known or size is None or "$(" in size:
        return
    elif not placed_by(container, "--rank", "--world-size") and refused_alone(size):
        yield (
            f"{_where(job)}: DISTCONV_WORLD_SIZE {size!r} but the Job is not Indexed: its "
            "one rank has no index and would refuse to start (set completionMode: Indexed)"
        )
