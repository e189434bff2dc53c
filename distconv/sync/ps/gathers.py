"""The shard's collectives: gathers and byes, and the check that fails a job at once when
ranks are held at points of the job that can never meet (:mod:`~distconv.sync.ps.stuck`)."""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from distconv.messages import SENT_ERROR_CHARS, one_line
from distconv.sync.ps.late_job_check import LateJobCheck
from distconv.sync.ps.left_behind import StepsLeftBehind
from distconv.sync.ps.processes import ProcessWatch
from distconv.sync.ps.state import _Refused, _Waiting
from distconv.sync.ps.stuck import held_now, stuck
from distconv.sync.ps.wire import MAX_HEADER_BYTES, WireError, pack, short

log = logging.getLogger("distconv.pserver")

#: the collectives workers gather through shard 0, tagged "<kind>:<counter>"
GATHER_KINDS = ("allreduce", "barrier", "all_equal")
#: the most digits of a tag's counter (a worker's count of its collectives since its latest
#: hello, from 1: 20 digits pass 2**64): every message naming a rank in a gather quotes its tag
TAG_DIGITS = 20
#: the most levels a gather's value may nest (lists and maps in a list): the reply holds it two
#: levels deeper (its header's map, the ranks' list), and msgpack reads no header nested past
#: 1024 levels, so a value a request could carry made a reply no worker could read
VALUE_DEPTH = 64


class ShardGathers(LateJobCheck, StepsLeftBehind):
    """The gather and bye side of :class:`~distconv.sync.ps.server.Shard` (whose state they
    share: ``waiting``, ``gathers_held``, the request counts of each rank's hellos and byes)."""

    waiting: dict[str, _Waiting]
    gathers_held: set[str]  # the gather keys in ``waiting``
    requests: int  # requests handled so far: when each hello, bye and held request came
    hello_at: dict[int, int]
    accepted_at: dict[int, int]
    refused_at: dict[int, tuple[int, int | None]]
    other_job: dict[int, tuple[int, str]]
    run_of: dict[int, int | None]
    bye_at: dict[int, int]
    bye_error: dict[int, str | None]
    bye_blames: dict[int, list[int]]
    #: per rank, the step its latest ``abandon`` said will not finish, its error and blames
    abandoned: dict[int, tuple[int, str | None, list[int]]]
    last_step: dict[int, int]
    met_at: int
    left: set[int]
    lost: set[int]
    index: int
    hosts: dict[int, str]
    processes: ProcessWatch

    def _op_gather(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        if self.index != 0:  # held here, it met no other rank's, and failed the job instead
            raise WireError(
                f"gather {short(header['tag'])} sent to shard {self.index}: a job's gathers go "
                "to shard 0"
            )
        kind, _, number = str(header["tag"]).partition(":")
        decimal = number.isascii() and number.isdigit()  # not "²" nor "٣", digits to isdigit
        if kind not in GATHER_KINDS or not decimal or len(number) > TAG_DIGITS:
            # a made-up tag would hold every other rank's gathers hostage until the timeout
            raise WireError(
                f"gather tag {short(header['tag'])} is not one of {GATHER_KINDS} + ':N' "
                f"(N: at most {TAG_DIGITS} decimal digits, 0-9)"
            )
        if nests_deeper(header["value"], VALUE_DEPTH):
            raise WireError(
                f"gather {short(header['tag'])}: its value nests lists or maps more than "
                f"{VALUE_DEPTH} levels deep (a value is a str, a list or nil)"
            )
        self._refuse_lost(header["rank"])
        self._refuse_second_gather(header["rank"], header["tag"])
        key = f"gather:{header['tag']}"
        waiting = self.waiting.setdefault(key, _Waiting(header["tag"], time.monotonic()))
        self.gathers_held.add(key)
        if header["rank"] in waiting.by_rank:
            raise WireError(f"rank {header['rank']} sent {short(header['tag'])} twice")
        waiting.by_rank[header["rank"]] = (ident, header, [])
        waiting.arrived[header["rank"]] = self.requests
        self._finish_gather(key)

    def _refuse_second_gather(self, rank: int, tag: str) -> None:
        """Refuse a gather of ``rank`` while another of it is held: a worker waits in one gather
        at a time, and its ``hello`` drops those of its run before (:meth:`_forget_gathers`).
        Each was held until the timeout, so a rank sending gather after gather with new tags
        (up to a MiB of ``value`` each) grew shard 0's memory without bound."""
        for key in self.gathers_held:
            held = self.waiting[key]
            if rank in held.by_rank and held.what != tag:  # the same tag: "sent twice"
                raise WireError(
                    f"rank {rank} sent gather {short(tag)} while its {short(held.what)} is "
                    "held: a worker waits in one gather at a time"
                )

    def _finish_gather(self, key: str) -> None:
        waiting = self.waiting[key]
        if not self._live() <= set(waiting.by_rank):
            return
        self._drop_gather(key)
        self.met_at = self.requests  # every live rank met here (see _check_stuck)
        if waiting.what.startswith("allreduce:"):
            total, problem = rank_order_sum(
                {r: header["value"] for r, (_, header, _) in waiting.by_rank.items()}
            )
            reply = {"sum": total}
            problem = problem or self._sum_too_large(total)
        else:
            values = [
                waiting.by_rank[r][1]["value"] if r in waiting.by_rank else None
                for r in range(self.config.workers)
            ]
            problem, reply = self._reply_too_large(values), {"values": values}
        if problem:  # every rank stops naming why, not on a reply it cannot read
            problem = f"gather {short(waiting.what)}: {problem}"
            log.warning("shard %d: %s", self.index, problem)
            self._dismiss(waiting.by_rank.values(), problem)
            return
        for ident, header, _ in waiting.by_rank.values():
            self._reply(ident, header, **reply)

    def _reply_too_large(self, values: list) -> str | None:
        """Why the reply to a gather, every rank's value in its header, cannot go, or None:
        each value fits a request's header, yet together they may pass the cap, and every
        worker refused such a reply as malformed, blaming the shard."""
        size = len(pack({"op": "ok", "id": -(2**63), "values": values})[0])  # the widest id
        if size <= MAX_HEADER_BYTES:
            return None
        sizes = [len(pack({"value": v})[0]) for v in values]
        largest = max(range(len(values)), key=sizes.__getitem__)
        return (
            f"the ranks' values together make a reply header of {size} "
            f"bytes, over the {MAX_HEADER_BYTES} a header may hold (rank {largest} sent the "
            f"largest, about {sizes[largest]} bytes): gather fewer values at a time"
        )

    def _sum_too_large(self, total: list[float]) -> str | None:
        """Why the reply to an allreduce, the ranks' sum in its header, cannot go, or None.
        msgpack may carry a request's floats in 32 bits (5 bytes: a worker of another
        language's msgpack), the shard's sum takes 64 (9 bytes), so a request within the cap
        made a reply of nearly twice it, which every worker refused as malformed, blaming the
        shard, as :meth:`_reply_too_large` prevents for the other gathers."""
        size = len(pack({"op": "ok", "id": -(2**63), "sum": total})[0])  # the widest id
        if size <= MAX_HEADER_BYTES:
            return None
        return (
            f"the ranks' sum of {len(total)} values makes a reply header of {size} bytes, "
            f"over the {MAX_HEADER_BYTES} a header may hold (64-bit floats; a rank's request "
            "may carry them in 32): sum fewer values at a time"
        )

    def _op_bye(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        rank = header["rank"]
        if self._of_latest_run(header):  # not a second worker of the rank (an earlier run's)
            self.left.add(rank)
            self.processes.forget(rank)  # its process may end now: that is no loss
            self.bye_at[rank] = self.requests
            # one short line, whoever sent it: every later message and the log quote it
            self.bye_error[rank], self.bye_blames[rank] = self._ending(header)
        self._reply(ident, header)

    def _op_abandon(self, ident: bytes, header: dict[str, Any], arrays: list) -> None:
        """A worker's note that its step ``step`` will not finish (it raised in it), with the
        error, as its ``bye`` carries one (:mod:`~distconv.sync.ps.endings`): in sync mode the
        other ranks' held pushes of that step that it never pushed fail the step now
        (:meth:`_fail_step_left_behind`), and so do such pushes that come later. A request of
        an earlier run is refused before; the note holds until the rank's next hello."""
        self._keep_note(header["rank"], (header["step"], *self._ending(header)))
        self._reply(ident, header)

    def _ending(self, header: dict[str, Any]) -> tuple[str | None, list[int]]:
        """The error a ``bye`` or an ``abandon`` carries, one short line (every later message
        and the log quote it, whoever sent it), and the ranks its ``failed_ranks`` names (it
        ended on a PeerFailed naming them): those of this job, other than its own."""
        error, blames = header.get("error"), header.get("failed_ranks")
        blamed = [
            r for r in (blames if type(blames) is list else [])
            if type(r) is int and 0 <= r < self.config.workers and r != header["rank"]
        ]  # fmt: skip
        return (one_line(error, SENT_ERROR_CHARS) if error else None), blamed

    def _refuse_lost(self, rank: int) -> None:
        """Shard 0, which holds the gathers, refuses a ``hello`` or a ``gather`` of a rank it
        declared lost (async, ``--on-worker-loss continue``): no later gather waits for it, so
        its own could only wait for the timeout, and fail the job then. (Another shard may
        declare a rank lost while it waits in a gather on shard 0: it decides nothing here.)

        Raises:
            _Refused: naming why, and how to take the rank back; or, when every rank that
                has not closed was declared lost too, that the job cannot go on.
        """
        if self.index != 0 or rank not in self.lost:
            return
        if not self._live() - self.left:
            raise _Refused(
                f"rank {rank} was declared lost, and so was every rank that has not closed: "
                "the job cannot go on (if they were only paused longer than --timeout, as in "
                "a long evaluation, raise it)"
            )
        raise _Refused(
            f"rank {rank} was declared lost and the job goes on without it "
            "(--on-worker-loss continue): a worker of it cannot join again until the "
            "shards restart (from their checkpoint)"
        )

    def _check_stuck(self, op: str = "gather") -> None:
        """Fail the job at once if what the shard holds can never be answered
        (:func:`~distconv.sync.ps.stuck.stuck`), instead of at the timeout; after ``op``
        arrived (an async push holds nothing, so it changes nothing)."""
        if self.config.mode == "sync" and op in ("push", "bye", "abandon") and not self.failed:
            self._fail_step_left_behind()
        if self.failed or not self.gathers_held or (op == "push" and self.config.mode == "async"):
            return  # every stuck case has a rank in a gather
        in_gathers = sum(len(self.waiting[key].by_rank) for key in self.gathers_held)
        pushes_held = len(self.waiting) > len(self.gathers_held)
        if in_gathers < self.config.workers - len(self.lost) and not pushes_held and not self.left:
            return  # a rank still to come to a gather, no step held, nobody gone: the usual
        gathers, pushes, since = held_now(self.waiting, self.hello_at, self._live())
        first = min((self.hello_at.get(r, -1) for r in gathers), default=-1)
        gone = {r for r in self.left - self.lost if self._left_this_run(r, since, first)}
        gone -= {r for r in gone if self._gave_up_on_a_shard(r)}  # its restart may still come
        message = stuck(gathers, pushes, self._live(), gone, self._who, self._closed)
        if message:  # a rank gone on an error is the cause; else the ranks disagree
            lead, fields = self._refusal_lead(gone)  # as a step left behind reads them
            if not self._end_refused_start(gone):  # nothing seeded: no shard fails (refusals.py)
                self._fail(f"{lead}{message}", self._blamed(gone), **fields)

    def _left_this_run(self, rank: int, since: int, first: int = -1) -> bool:
        """Whether ``rank``'s bye came in the run of the ranks in a gather, whose hellos of a
        new run came from ``first`` to ``since``: after ``since``, and either the ranks have
        met since (every live rank was in one answered gather) or ``rank`` said hello of a new
        run (or was refused) after it too. Else it may be a worker of the run before, still
        alive after another rank restarted (a second setup of it too): the timeout decides.

        A rank whose latest hello of a new run was refused, after ``first``, counts once its
        bye came after the refusal, before ``since`` or not: a refused worker closes at once,
        so it was of this run, and its rank joins no gather of it. With three ranks, a third's
        hello between the refusal and the bye (or after both) left the others waiting out the
        timeout, told only that the rank closed."""
        refused = self.refused_at.get(rank, (-1,))[0]
        if first < refused and self.accepted_at.get(rank, -1) < refused < self.bye_at.get(rank, -1):
            return True
        hello = max(self.hello_at.get(rank, -1), refused)
        after = self.bye_at.get(rank, -1) > since
        return after and (self.met_at > since or hello > since)

    def _forget_gathers(self, rank: int) -> None:
        """Drop ``rank``'s held gathers: it says ``hello``, so they are an earlier run's (a
        worker in a gather sends nothing else), and its new run's tags would repeat them. A
        worker of that run still waiting (a pod evicted while its replacement starts) is told
        so and stops now, instead of at its timeout."""
        for key in list(self.gathers_held):
            held = self.waiting[key]
            dropped = held.by_rank.pop(rank, None)
            if not held.by_rank:
                self._drop_gather(key)
            if dropped is not None:
                why = f"{self._restarted(rank)}: this worker's {held.what} is of the run before"
                self._dismiss([dropped], f"{why}, dropped")

    def _drop_gather(self, key: str) -> None:
        """Hold gather ``key`` no more (``waiting`` and ``gathers_held`` change together)."""
        del self.waiting[key]
        self.gathers_held.discard(key)


def rank_order_sum(sent: dict[int, Any]) -> tuple[list[float] | None, str | None]:
    """The element-wise sum of the lists of floats the ranks ``sent`` (by rank; a rank an
    asynchronous job lost sends none) in rank order, and None; or None and why they cannot be
    summed, naming a rank.

    Shard 0 sums an ``allreduce`` gather itself and answers with the sum alone: answered with
    every rank's list, each worker summing, the reply grew as the world squared (the epoch's
    sums carry a value per rank from each) and passed the header cap from about 240 workers.
    Rank order is the order every worker summed in before, so the floats are the same."""
    ranks = sorted(sent)
    for rank in ranks:
        value = sent[rank]
        if not isinstance(value, list) or not all(type(x) is float for x in value):
            return None, f"rank {rank} sent {short(value)} to sum, not a list of floats"
    counts = {rank: len(sent[rank]) for rank in ranks}
    other = next((r for r in ranks if counts[r] != counts[ranks[0]]), None)
    if other is not None:
        return None, (
            f"the ranks sum different numbers of values: rank {ranks[0]} sent "
            f"{counts[ranks[0]]}, rank {other} sent {counts[other]} (other code, or another "
            "point of the job)"
        )
    total = np.zeros(counts[ranks[0]] if ranks else 0)
    # a sum past the range is inf, inf - inf NaN, as the workers' own float loop gave them,
    # silently: the epoch's fold names a loss gone NaN or infinite, and numpy's warning was
    # a stray pair of lines (a file, a line of code) in the shard's log
    with np.errstate(over="ignore", invalid="ignore"):
        for rank in ranks:  # one add a rank, in rank order: the floats a worker's loop made
            total += sent[rank]
    return total.tolist(), None


def nests_deeper(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists or maps (each one level) more than ``limit`` levels deep;
    read level by level, at most ``limit + 1`` of them (no recursion)."""
    level = [value]
    for _ in range(limit + 1):
        containers = [v for v in level if type(v) in (list, dict)]
        if not containers:
            return False
        level = [x for v in containers for x in (v.values() if type(v) is dict else v)]
    return True
