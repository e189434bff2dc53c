"""How a rank of an Indexed Job places itself at start, as :mod:`distconv.placement` and
:func:`distconv.runtime.detect_runtime` read its environment and flags (part of
:func:`distconv.deploy.check_workers._worker_counts`): by the Job's ``JOB_COMPLETION_INDEX``
with ``DISTCONV_WORLD_SIZE``, by a launcher's pair its command line or pod sets
(``RANK``/``WORLD_SIZE``, ``OMPI_COMM_WORLD_RANK``/``OMPI_COMM_WORLD_SIZE``,
``PMI_RANK``/``PMI_SIZE``), which must agree with the index where both are seen, or, where
the command line takes the index from it (``env -i``, ``env -u``, bash's ``exec -c``) and sets
no pair, by nothing: rank 0 of 1. A rank given both ``--rank`` and ``--world-size`` reads
none of them and is not judged here.
"""

from __future__ import annotations

from collections.abc import Iterator

from distconv.deploy.check_ranks import _other_count
from distconv.deploy.check_shards import env_as_seen, expand
from distconv.deploy.index_reads import (
    EACH_INDEX,
    INDEX,
    LOCALS,
    Pair,
    _index_removed,
    _pairs,
    _seen,
    _train_args,
    placed_by,
    refused_alone,
    why_left,
)
from distconv.deploy.walk import Manifest, _flag, _where
from distconv.placement import ENV_WORLD_SIZE
from distconv.runtime import INTEGER_TEXT


def index_rank_problems(
    job: Manifest, container: Manifest, completions: int | None
) -> Iterator[str]:
    """What stops the ranks that ``container`` of Indexed Job ``job`` runs from each training
    as its own rank of ``completions`` (None: a count that is no integer, not compared), as
    they place themselves at start; a rank given both ``--rank`` and ``--world-size`` is
    :func:`~distconv.deploy.check_ranks._pod_settings`' to judge."""
    pairs = _pairs(container)
    known, size = env_as_seen(container, ENV_WORLD_SIZE)
    if not _index_removed(container):
        yield from _with_index(job, container, known, size, completions)
        yield from _pair_problems(job, container, pairs or [], size, completions, index=True)
    elif pairs:
        yield from _pair_problems(job, container, pairs, size, completions, index=False)
    elif pairs is not None and known:
        yield from _without_index(job, container, size, 1 if completions is None else completions)


def _with_index(
    job: Manifest, container: Manifest, known: bool, size: str | None, completions: int | None
) -> Iterator[str]:
    """Ranks that keep the Job index: it needs ``DISTCONV_WORLD_SIZE`` ``size`` beside it, an
    integer, which is the world unless ``--world-size`` is given: the flag wins, silently
    (:func:`distconv.runtime._placement`), and _pod_settings compares it with completions."""
    if not known:  # the cluster's to fill in: not judged
        return
    runs = "" if completions is None else f" (the Job runs {completions})"
    if size is None:  # the ranks take theirs from the Job index, and need it then
        yield f"{_where(job)}: DISTCONV_WORLD_SIZE is not set; {_REFUSED}{runs}"
    elif "$(" in size:  # a reference the kubelet leaves as written: not judged
        return
    elif placed_by(container, "--world-size"):
        if not INTEGER_TEXT.fullmatch(size):  # placement.env_int
            yield f"{_where(job)}: DISTCONV_WORLD_SIZE {size!r} is no integer: {_REFUSED}"
    elif completions is not None and _other_count(size, completions):
        yield f"{_where(job)}: DISTCONV_WORLD_SIZE {size!r} != completions {completions}"


def _pair_problems(
    job: Manifest,
    container: Manifest,
    pairs: list[Pair],
    size: str | None,
    completions: int | None,
    *,
    index: bool,
    runs: str = "",
    indexed: bool = True,
) -> Iterator[str]:
    """Ranks that see the launchers' ``pairs``, beside the Job index (``index``) or without
    it: placement reads each pair, which needs both its variables as integers
    (:func:`_unread`), a size that a ``DISTCONV_WORLD_SIZE`` ``size`` set beside it says too
    (:func:`distconv.placement._check_world_size_var`; with the index, which takes its world
    from that variable, they must agree) and a rank that is each pod's own
    (``$(JOB_COMPLETION_INDEX)``), not one for all. Without the index the pair's size is the
    world, ``completions`` (``runs`` says how many the Job runs: its completions where
    empty). A ``--world-size`` or a ``--rank`` given beside them wins over
    what they say of that (:func:`distconv.runtime._placement`; _pod_settings judges the
    flag), but they are read still."""
    where, train = _where(job), _train_args(container)
    world_given, rank_given = (_flag(train, f) is not None for f in ("--world-size", "--rank"))
    read: list[Pair] = []
    for rank_var, size_var, rank, world in pairs:
        unread = _unread(rank_var, size_var, rank, world)
        if unread is not None:
            yield f"{where}: {unread}"
            continue
        assert rank is not None and world is not None  # _unread names a half pair
        pair = (rank_var, size_var, rank, world)
        if read and (disagree := _against_first(read[0], pair, completions)) is not None:
            yield f"{where}: {disagree}"  # whatever a flag says: placement reads both
            continue
        if size is not None and "$(" not in size and _other_count(size, int(world)):
            yield (
                f"{where}: DISTCONV_WORLD_SIZE {size!r} but {size_var} {world!r}: {_REFUSED} "
                "(two sources disagree about the world size)"
            )
        elif not (index or world_given) and completions is not None:
            if _other_count(world, completions):
                yield f"{where}: {size_var} {world!r} {runs or f'!= completions {completions}'}"
        read.append(pair)
        if rank == EACH_INDEX or completions is None or (rank_given and not index):
            continue  # each pod's own, not compared, or the flag's
        if completions > 1 or int(rank) != 0:  # a Job of one: index 0, which rank 0 is
            yield _one_rank_for_all(where, rank_var, rank, completions, index)
    for local in _local_problems(container, read, completions, index, indexed) if read else ():
        yield f"{where}: {local}"


def _against_first(first: Pair, pair: Pair, completions: int | None) -> str | None:
    """Why placement refuses a later ``pair`` beside the ``first`` it reads: it compares their
    ranks and sizes before a ``--rank`` or ``--world-size`` (not both) wins; None where they
    agree in every pod of a Job of ``completions`` (None: not known, a pod's index not judged)."""
    (first_rank_var, first_size_var, first_rank, first_world), (var, size_var, rank, world) = (
        (f[0], f[1], str(f[2]), str(f[3])) for f in (first, pair)
    )
    if int(world) != int(first_world):
        return (
            f"{size_var} {world!r} but {first_size_var} {first_world!r}: {_REFUSED} (two "
            "sources disagree about the world size)"
        )
    if not _differ(first_rank, rank, completions):
        return None
    some = EACH_INDEX in (first_rank, rank)  # the pod whose index is the other trains
    return (
        f"{var} {_shown(rank)} but {first_rank_var} {_shown(first_rank)}: "
        f"{'the ranks would refuse to start' if some else _REFUSED} (two sources disagree "
        "about the rank)"
    )


def _unread(rank_var: str, size_var: str, rank: str | None, world: str | None) -> str | None:
    """Why placement refuses a pair at start: one of it set alone (``placement._triple``), a
    value it cannot read as an integer, the index as the size (each rank's world its rank:
    out of range); None where it reads the pair."""
    if rank is None or world is None:
        present, missing = (size_var, rank_var) if rank is None else (rank_var, size_var)
        return f"{present} is set but {missing} is not: {_REFUSED}"
    if world == EACH_INDEX:
        return f"{size_var} {INDEX} makes each rank's index its world size: {_REFUSED}"
    for var, text in ((rank_var, rank), (size_var, world)):
        if text != EACH_INDEX and not INTEGER_TEXT.fullmatch(text):
            return f"{var} {text!r} is no integer: {_REFUSED}{why_left(text)}"
    return None


def _local_problems(
    container: Manifest, pairs: list[Pair], completions: int | None, index: bool, indexed: bool
) -> Iterator[str]:
    """Why placement refuses the local ranks it reads beside the ``pairs`` it reads (each
    ``(rank_var, size_var, rank, world)``, both integers): each set must be an integer; it
    compares every other source with the first only, so the first pair's local rank, where
    set, must be each other pair's that is set, and the Job ``index``'s (0); the first set,
    which the rank takes, must lie in the world (:func:`_local_world`) and be 0, as a Job's
    pod runs one rank (local rank R serves ``--health-port`` + R, uses CUDA device R). None
    is judged where only the cluster or each pod knows one."""
    found = []
    for rank_var, size_var, _, world in pairs:
        var = LOCALS[rank_var]
        known, local = _seen(container, var, indexed)
        if not known:
            return
        if local is not None and local != EACH_INDEX and not INTEGER_TEXT.fullmatch(local):
            yield f"{var} {local!r} is no integer: {_REFUSED}{why_left(local)}"
            return
        found.append((var, local, size_var, world))
    named = [*_disagreeing(found, completions, index)] if found[0][1] is not None else []
    yield from named
    var, local, _, _ = next((f for f in found if f[1] is not None), found[0])
    world = _local_world(container, found[0][2], found[0][3])
    if named or local is None:
        return
    if local != EACH_INDEX and world is not None and not 0 <= int(local) < int(world[1]):
        yield f"{var} {local!r} is out of range for {world[0]}: {_REFUSED}"
    elif _differ(local, "0", completions):  # the rank takes it: runtime.local_rank
        yield (
            f"{var} {_shown(local)} gives the pod's one rank a local rank other than 0: it "
            "would serve --health-port plus it, not the port its probes ask, and train on "
            f"that CUDA device (set {var} to 0)"
        )


def _local_world(container: Manifest, size_var: str, size: str) -> tuple[str, str] | None:
    """(its name in a message, its value) of the world a local rank must lie in
    (:func:`distconv.runtime._check_ranges`): the ``--world-size`` the rank gives, which wins
    over the first pair's ``size_var`` ``size``; None where the flag is one only the cluster
    knows, or no integer (which every rank refuses, named as such elsewhere)."""
    flag = _flag(_train_args(container), "--world-size", last=True)
    if flag is None:
        return f"{size_var} {size!r}", size
    world = expand(flag, container)  # as the kubelet passes it
    return (f"--world-size {world.strip()}", world) if INTEGER_TEXT.fullmatch(world) else None


def _disagreeing(
    found: list[tuple[str, str | None, str, str]], completions: int | None, index: bool
) -> Iterator[str]:
    """The local ranks in ``found`` that differ from the first's (set); it, from the index's 0."""
    (var, local, _, _), *others = found
    assert local is not None
    for other, theirs, _, _ in others:
        if theirs is not None and _differ(local, theirs, completions):
            yield (
                f"{other} {_shown(theirs)} but {var} {_shown(local)}: {_REFUSED} (two sources "
                "disagree about the rank)"
            )
    if not index or not _differ(local, "0", completions):
        return
    if local == EACH_INDEX:
        yield (
            f"{var} is each rank's index, beside the Job index, whose local rank is 0: each "
            "rank but 0 would refuse to start (two sources disagree about the rank)"
        )
    else:
        yield (
            f"{var} {local!r} beside the Job index, whose local rank is 0: {_REFUSED} (two "
            "sources disagree about the rank)"
        )


def _differ(local: str, other: str, completions: int | None) -> bool:
    """Whether local ranks ``local`` and ``other`` (integers, or each pod's index) differ in
    some pod of a Job of ``completions`` (None: not known, not judged)."""
    if EACH_INDEX not in (local, other):
        return int(local) != int(other)
    if local == other or completions is None:
        return False
    literal = other if local == EACH_INDEX else local
    return completions > 1 or int(literal) != 0


def _shown(local: str) -> str:
    """A local rank as the manifest writes it."""
    return INDEX if local == EACH_INDEX else repr(local)


def _one_rank_for_all(where: str, rank_var: str, rank: str, completions: int, index: bool) -> str:
    """The problem of a pair's rank ``rank`` given every pod of a Job of ``completions``,
    beside the Job ``index`` (each pod's rank, which it must agree with) or without it."""
    if index:
        return (
            f"{where}: {rank_var} {rank!r} is every rank's, beside the Job index: each rank "
            f"whose index is not {rank.strip()} would refuse to start (two sources disagree "
            "about the rank)"
        )
    if completions > 1:
        return (
            f"{where}: {rank_var} {rank!r} is every rank's: the Job's {completions} ranks would "
            f"all claim it (each takes its own from {INDEX})"
        )
    return (
        f"{where}: {rank_var} {rank!r} but the Job runs 1 rank, rank 0: it would refuse to "
        "start (out of range), or wait for a rank 0 that never starts"
    )


#: how a problem ends where no rank starts
_REFUSED = "every rank would refuse to start"
#: the command lines that start a rank without the Job's index
_TAKEN_BY = "env -i, env -u, exec -c"


def _without_index(
    job: Manifest, container: Manifest, size: str | None, completions: int
) -> Iterator[str]:
    """An Indexed Job's ranks started without ``JOB_COMPLETION_INDEX`` (``env -i``, ``env -u
    JOB_COMPLETION_INDEX``, bash's ``exec -c``) and no pair: each is rank 0 of 1, right for a
    Job of one rank only, and refuses a ``DISTCONV_WORLD_SIZE`` above 1 at start. A rank given
    ``--rank`` or ``--world-size`` (not both: not judged here) reads no
    ``DISTCONV_WORLD_SIZE``: its world is ``--world-size``, or 1, and one above 1 with no
    ``--rank`` is refused. One the cluster fills in is not judged."""
    train = _train_args(container)
    rank, world = _flag(train, "--rank", last=True), _flag(train, "--world-size", last=True)
    taken = f"the ranks' command line takes JOB_COMPLETION_INDEX from them ({_TAKEN_BY})"
    if world is not None:  # 1 is rank 0 of 1; another count is _pod_settings' to name
        world = expand(world, container)
        if INTEGER_TEXT.fullmatch(world) and int(world) > 1:
            yield (
                f"{_where(job)}: --world-size {world.strip()} but {taken}: nothing says which "
                "rank each is, and every rank would refuse to start"
            )
        return
    if rank is None and size is not None and "$(" in size:
        return
    if rank is None and size is not None and refused_alone(size):
        yield f"{_where(job)}: DISTCONV_WORLD_SIZE {size!r} but {taken}: {_REFUSED}"
    elif rank is not None and completions != 1:  # --rank R of 1: 0 trains alone, others stop
        yield (
            f"{_where(job)}: {taken}: with no index and no --world-size every rank's world is "
            f"1 rank (the Job runs {completions})"
        )
    elif completions != 1:
        yield (
            f"{_where(job)}: {taken}: with no index every rank would train as rank 0 of 1 (the "
            f"Job runs {completions})"
        )
