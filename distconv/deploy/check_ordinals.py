"""How the ranks of a StatefulSet's pods (or of a bare Pod) place themselves by their host
names' ordinals (part of :func:`distconv.deploy.check_workers._stateful_ranks` and of
``check.py``'s bare Pod): each judged pod's placement is worked out as its rank works it out
at start (:func:`_placed`), of more than :data:`~distconv.deploy.counts.JUDGED_ALL` pods on a
sample (:func:`~distconv.deploy.counts.judged_pods`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from distconv.deploy.check_shards import _is_filled, env_as_seen, expand
from distconv.deploy.counts import MAX_NAMED
from distconv.deploy.index_reads import INDEX_NAME, LOCALS, PAIRS, _train_args
from distconv.deploy.walk import Manifest, _flag, pod_hostname
from distconv.placement import ENV_RANK_FROM_HOSTNAME, ENV_WORLD_SIZE, RuntimeConfigError
from distconv.runtime import ENV_ROLE, detect_runtime
from distconv.short_lists import short_list

#: the variables a rank's placement reads (distconv.placement, distconv.runtime._role)
_PLACEMENT_VARS = (ENV_ROLE, ENV_WORLD_SIZE, ENV_RANK_FROM_HOSTNAME, INDEX_NAME, *LOCALS.values())
_PLACEMENT_VARS += tuple(name for pair in PAIRS for name in pair)

#: a pod's host name by its index (ordinal ``spec.ordinals.start`` + index)
HostOf = Callable[[int], str]


def ordinal_hosts(name: str, first: int) -> HostOf:
    """The host names of StatefulSet ``name``'s pods, its ordinals from ``first``."""
    return lambda index: pod_hostname(f"{name}-{first + index}")


def by_ordinal(
    container: Manifest, host_of: HostOf, pods: int, judged: Sequence[int]
) -> str | None:
    """Why the ranks ``container`` runs as ``pods`` pods (a StatefulSet's, in ordinal order,
    named ``host_of(index)``) do not each take their own rank of as many, with local rank 0
    (one rank a pod: local rank R serves ``--health-port`` + R), judged on the pods
    ``judged`` (ascending indices): pod N must take rank N, as its ordinal gives it. None where
    they do, or where only the cluster knows a value placement reads. A refusing rank is
    named by its first pod; otherwise the line shows five pods (the first, or from the first
    misplaced one where those are placed right), then how many pods follow them."""
    placed: dict[int, tuple[int, int, int]] = {}
    for index in judged:
        where = _placed(container, host_of(index))
        if where is None:
            return None
        if isinstance(where, str):
            host = host_of(_first_refusing(container, host_of, max(placed, default=-1), index))
            return f"pod {host}'s rank would refuse to start: {_placed(container, host)}"
        placed[index] = where
    wrong = [index for index, where in placed.items() if where != (index, pods, 0)]
    if not wrong:
        return None
    start = wrong[0] if wrong[0] >= MAX_NAMED else 0  # the first five, or from the first wrong
    # the pods in a row, as judging each gives: the sample may skip some (none refuses here)
    listed = range(start, min(start + MAX_NAMED, pods))
    said = [_shown(host_of(i), placed.get(i) or _placed(container, host_of(i))) for i in listed]
    shown = short_list(said, MAX_NAMED, separator="; ", more=pods - listed.stop)
    return f"the ranks would take ({shown}), not each pod its own of {pods}, local rank 0"


def _shown(host: str, where: tuple[int, int, int] | str | None) -> str:
    """How the line shows the placement ``where`` of the pod named ``host``, one that starts."""
    assert isinstance(where, tuple), where  # none refuses, none is the cluster's: by_ordinal
    rank, world, local = where
    return f"{host}: rank {rank} of {world}{f', local rank {local}' if local else ''}"


def _first_refusing(container: Manifest, host_of: HostOf, starts: int, refuses: int) -> int:
    """The first pod after pod ``starts`` (-1: none) whose rank refuses to start, where pod
    ``refuses`` is the first judged one that does and each judged before it starts. A bisect:
    the ranks of a run of ordinals of as many digits grow with the ordinal (each its ordinal,
    or a prefix of it at one length: judged_pods), and a rank is refused where it is past the
    world or not the one a launcher's pair names, so the ranks that start in a run are one
    stretch of it; the run's first pod is judged and starts, so from it on they refuse from
    one pod on, and the runs before ``refuses``' each start at both ends, so throughout."""
    while refuses - starts > 1:
        middle = (starts + refuses) // 2
        if isinstance(_placed(container, host_of(middle)), str):
            refuses = middle
        else:
            starts = middle
    return refuses


def _placed(container: Manifest, host: str) -> tuple[int, int, int] | str | None:
    """(rank, world, local rank) the rank ``container`` runs takes at start in the pod whose
    host name is ``host`` (:func:`distconv.runtime.detect_runtime`, on its env and its
    ``--rank`` and ``--world-size`` as the kubelet passes them), why it refuses to start, or
    None where only the cluster knows one of them."""
    env = {}
    for name in _PLACEMENT_VARS:
        known, value = env_as_seen(container, name)
        if not known:
            return None
        if value is not None:
            env[name] = value
    train, flags = _train_args(container), {}
    for key in ("rank", "world_size"):
        written = _flag(train, f"--{key.replace('_', '-')}", last=True)
        value = None if written is None else expand(written, container)
        if _is_filled(value):
            return None
        flags[key] = value
    try:
        runtime = detect_runtime(flags, env, host)
    except RuntimeConfigError as error:
        return str(error)
    return runtime.rank, runtime.world_size, runtime.local_rank
