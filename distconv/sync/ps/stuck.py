"""Requests that no later message can answer: ranks held on a shard at different points of the job.

A worker blocks in a ``gather`` (the start-up digest, a barrier, a metrics sum) until every
live rank has sent the same tag, and, in sync mode, in ``finish_step`` until every rank has
pushed the step's gradients. MPI's ranks meet the same way, and :mod:`distconv.sync.mpi`
names ranks that disagree at once; here, three things a shard holds can never be answered,
whatever arrives later, and the shard fails the job as soon as it sees one, instead of at its
timeout:

- **every live rank waits in a gather**, not all in the same one: a worker in a gather sends
  nothing else;
- **a rank waits in a gather while another rank's sync push is held**: the pushing rank
  finishes its step before it makes any collective, and its step needs the gathering rank's
  push, which a worker in a gather will not send;
- **a rank waits in a gather while another has said** ``bye``: a worker gone joins no gather.

All three hold within one run of the workers. A worker restarted against shards that kept
running (Kubernetes restarts a failed worker's container; the shards are a StatefulSet) says
``hello`` again with a new run id (a second ``setup`` of the same worker keeps its run) and
starts its collectives afresh, so what a rank's earlier run left held, and a push, a gather
past the start-up one or a ``bye`` from before the gathering ranks' latest ``hello`` of a new
run, count for nothing here (:func:`held_now`, and the shard's ``bye`` filter); the shard
drops a rank's held gathers when it says ``hello`` again (and every held push at a new seed),
answering each with why, and refuses what a worker of another run than its rank's latest
then sends. A ``bye`` counts only once the ranks have met since the gathering ranks' ``hello``,
or its rank said ``hello`` of a new run (or was refused) after them, or its rank's latest
``hello`` of a new run was refused after the first of theirs (a refused worker closes at once:
with three ranks, a third's ``hello`` may come between the refusal and the ``bye``, or after
both): one from a worker of the run before, still alive after another rank restarted, is left to
the timeout; one from a second worker of a rank, alive beside its restart, carries another run
id than the rank's latest accepted ``hello`` (and than a refused one since, whose worker closes)
and is ignored. Pushes are held only in sync mode, and only shard 0 holds gathers, so the last
two are seen where the push or the ``bye`` reaches shard 0; other cases end at the timeout, as
before. What the shard cannot tell apart without a job-wide run number is listed in
``docs/protocol.md`` (Timeouts and failures).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from distconv.rank_endings import another_job_text, different_jobs_text
from distconv.sync.ps.shard_timeouts import GATHER_TAG
from distconv.sync.rate_agreement import SAME_NEW_RATE, SAME_START_RATE

#: what a rank in a gather of each kind is doing, for the message
GATHER_WORDS = {
    "all_equal": "comparing job descriptions (start-up)",
    "barrier": "at a barrier",
    "allreduce": "summing metrics",
}
#: what a gather of each kind is, for a timeout's "sent nothing for all_equal:1 (...)" and a
#: worker's "no answer to ... (all_equal:1)"
GATHER_NAMES = {
    "all_equal": "setup's job check",
    "barrier": "a meeting of every rank",
    "allreduce": "a metrics sum",
}


def held_words(what: str, key: str, params: Sequence[Any]) -> str:
    """A held request as a timeout names what a rank sent nothing for: a gather by its tag
    and what it is (``all_equal:1 (setup's job check)``), a sync step's push by its step and
    the parameter the shard holds it for (``params``: the shard's, by index), by its name
    (``step 3 (the push of parameter fc1.W)``). The shard's keys told a user nothing:
    ``(gather:all_equal:1)`` only repeated the tag, ``(push:0)`` was the shard's own index."""
    if key.startswith("gather:"):
        kind = what.partition(":")[0]
        return f"{what} ({GATHER_NAMES.get(kind, 'a gather')})"
    index = int(key.partition(":")[2])
    return f"{what} (the push of parameter {params[index].name})"


def wait_words(what: str) -> str:
    """A worker's wait as its errors name it: a gather by what it is, then its tag
    (``setup's job check (all_equal:1)``, the tag kept for a reader's grep); any other request
    (``step 3``, ``pull``) as it is. The tag alone (``no answer to all_equal:1``) told a user
    nothing."""
    if GATHER_TAG.fullmatch(what) is None:
        return what
    return f"{GATHER_NAMES.get(what.partition(':')[0], 'a gather')} ({what})"


def pushes_waiting_for(
    waiting: Mapping[str, Any], gathers_held: Collection[str], pushes: Mapping[int, int], rank: int
) -> dict[int, int]:
    """The ranks whose held sync push (``pushes``: :func:`held_now`'s, rank -> step) waits for
    ``rank``'s, each with that step: held in a request other than a gather, which ``rank`` has
    not joined. A step left behind by a rank gone, or by one that could not set up."""
    return {
        q: pushes[q]
        for key, held in waiting.items()
        if key not in gathers_held and rank not in held.by_rank
        for q in held.by_rank
        if q in pushes
    }


def held_now(
    waiting: Mapping[str, Any], hello_at: Mapping[int, int], live: Collection[int] | None = None
) -> tuple[dict[int, str], dict[int, int], int]:
    """What each rank is held in now, leaving out what an earlier run of the workers left.

    Args:
        waiting: the shard's held requests by key (``gather:<tag>`` or ``push:<param>``), each
            with ``by_rank`` (rank -> (identity, request header, anything)) and ``arrived``
            (rank -> the shard's count of requests when that one came).
        hello_at: per rank, the shard's count of requests when its latest ``hello`` of a new
            run came.
        live: the ranks a gather waits for (None: all); a lost rank that says ``hello`` again
            does not start the live ranks' run, and nobody waits for its gather.

    Returns:
        Per live rank, the tag of the gather it waits in (no live rank waits for a lost one's);
        per rank, the step of its sync push held; and ``since``, the latest ``hello`` of a new
        run of the live ranks in a gather (-1 without one). A request from before its own
        rank's latest ``hello`` of a new run is left out, and so is a push, or a gather other
        than a run's first (tag ``<kind>:1``), from before ``since``: within one run every rank
        says ``hello`` before the start-up gather, which every later gather and every push
        follows.
    """
    gathers: dict[int, tuple[str, int]] = {}
    pushes: dict[int, tuple[int, int]] = {}
    for key, held in waiting.items():
        for rank, (_, header, _) in held.by_rank.items():
            arrived = held.arrived.get(rank, 0)
            if arrived < hello_at.get(rank, -1):
                continue
            if key.startswith("gather:"):
                gathers[rank] = (str(header["tag"]), arrived)
            else:
                pushes[rank] = (header["step"], arrived)
    if live is not None:
        gathers = {r: held for r, held in gathers.items() if r in live}
    since = max((hello_at.get(r, -1) for r in gathers), default=-1)
    # dropping a gather from before ``since`` leaves ``since`` as it is: its rank's own hello
    # came before the gather, so before ``since``
    now = {r: tag for r, (tag, at) in gathers.items() if at > since or _first(tag)}
    return now, {r: step for r, (step, at) in pushes.items() if at > since}, since


def _first(tag: str) -> bool:
    """Whether a gather's tag is a setup's first (a worker numbers its collectives from 1 at
    each hello)."""
    return tag.partition(":")[2] == "1"


def stuck(
    gathers: Mapping[int, str],
    pushes: Mapping[int, int],
    live: Iterable[int],
    gone: Collection[int],
    who: Callable[[int], str] = lambda rank: f"rank {rank}",
    closed: Callable[[int], str] = lambda rank: "closed",
) -> str | None:
    """Why the requests a shard holds can never all be answered, or None.

    Args:
        gathers: per rank, the tag of the gather it waits in (see :func:`held_now`).
        pushes: per rank, the step of its sync push held.
        live: the ranks a gather waits for (every worker but those lost in async mode).
        gone: the ranks whose ``bye`` is of the gathering ranks' run (the shard decides).
        who: how to name a rank in the message (the shard adds its host and last step).
        closed: how a rank in ``gone`` left (the shard adds the error its bye carried).

    Returns:
        A message naming what each live rank is doing and why none can go on (the shard leads
        it with the ranks' different jobs where a rank gone closed on them and none failed on
        its own: the cause, the others only waited); None when every held request may still
        be answered.
    """
    if not gathers:
        return None
    live = sorted(live)
    if all(r in gathers for r in live) and len({gathers[r] for r in live}) > 1:
        why = "each rank waits in a collective another rank never makes"
    elif any(q not in gathers for q in pushes):
        why = "a rank waits in a collective while another is in a step, which needs its push"
    elif any(r in gone and r not in gathers for r in live):
        why = "a rank closed (bye) while another waits in a collective"
    else:
        return None
    doing = []
    for r in live:
        if r in gathers:
            kind = gathers[r].partition(":")[0]
            doing.append(f"{who(r)}: {GATHER_WORDS.get(kind, kind)} ({gathers[r]})")
        elif r in pushes:
            doing.append(f"{who(r)}: pushed step {pushes[r]}, waiting for the others' pushes")
        elif r in gone:
            doing.append(f"{who(r)}: {closed(r)}")
        else:
            doing.append(f"{who(r)}: nothing held here")
    return f"ranks are at different points of the job ({'; '.join(doing)}): {why}"


def different_jobs(rank: int, job_rank: int, diff: str) -> str:
    """That ``rank``'s hello and ``job_rank``'s (the first accepted, which set the job) differ
    in ``diff``, naming both ranks as MPI's ``JobMismatch`` does: the shard cannot tell which
    one is wrong (the odd rank may have said hello first), so it blames neither."""
    if rank == job_rank:  # a restart of the rank that set the job, with another description
        return another_job_text(rank, f"{diff} (here: the new one)")
    return different_jobs_text(
        rank,
        job_rank,
        f"{diff} (here: rank {rank}'s hello; there: rank {job_rank}'s, the first the shard "
        "accepted)",
    )


def different_rates(rank: int, peer: int, diff: str, first: bool = False) -> str:
    """That ``rank``'s hello and ``peer``'s, both of the setup now starting, differ in the
    optimizer's rate alone (``diff``). Named as :func:`different_jobs` names two ranks, with
    the way out: at the job's ``first`` setup (nothing seeded yet), the ranks were started
    with different flags; at a later fit of the same workers, a rate changed between fits on
    some ranks only. ``peer`` is a rank of this setup, not the one whose first hello set the
    job."""
    way_out = SAME_START_RATE if first else SAME_NEW_RATE
    return different_jobs_text(
        rank,
        peer,
        f"{diff} (here: rank {rank}'s hello; there: rank {peer}'s, of the same setup): {way_out}",
    )


def one_line(diff: str, limit: int) -> str:
    """``diff`` on one line, cut to ``limit`` characters: each value is cut already
    (``job_hello.VALUE_CHARS``), this cuts a long received key, but keeps the spaces (values
    may differ in nothing else)."""
    diff = " ".join(diff.splitlines())
    return diff if len(diff) <= limit else diff[: limit - 3] + "..."
