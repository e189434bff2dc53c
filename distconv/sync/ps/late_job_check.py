"""Shard 0's start-up job check that ranks came late to: told to the ranks that wait, not a
failed job.

Every setup's first gather is its job check, ``all_equal:1``, which shard 0 holds until every
live rank has sent it. Held past the shard's ``--timeout``, it failed the job, and a failed
shard serves nobody until it is restarted. Where workers restart under a growing back-off, as
the kubelet restarts containers (10, 20, 40 s ... up to 5 minutes), they come back at
different moments: with a short ``--timeout`` the first to come waited out the timeout alone,
the shard failed, every worker was refused until the shard's liveness probe restarted it, and
by then the workers' back-offs had grown further apart. The job never trained again.

So where the ranks missing from the job check are only late (none waits in another gather, no
step is held, none was refused or left on the ranks' different jobs, none failed in this start
of the job: :meth:`LateJobCheck._only_late`), shard 0 answers the ranks that wait with the
timeout's words, the late ranks in ``failed_ranks`` and ``late``, and fails nothing: the late
ranks may still come, and a worker that waits says ``hello`` again
(:mod:`~distconv.sync.ps.late_ranks`), for a bounded time. A worker of a release before
``late`` stops on the reply as it stopped on the failure (``failed_ranks``: exit 75).
A missing rank whose hello of the setup was refused as another job, its worker alive (a
notebook's kernel, which says no ``bye``), is not late: the ranks that wait are told that
refusal instead, and nothing fails (:meth:`LateJobCheck._answered_refused`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from distconv.sync.ps.incarnations import Incarnation, older
from distconv.sync.ps.job_hello import REFUSED_JOB
from distconv.sync.ps.late_ranks import LATE_FIELD, no_answer_words
from distconv.sync.ps.state import _Waiting

log = logging.getLogger("distconv.pserver")

#: the tag of a setup's job check: every setup's first gather (each hello numbers them anew)
JOB_CHECK_TAG = "all_equal:1"
#: the shard's key of the held job check
JOB_CHECK_KEY = f"gather:{JOB_CHECK_TAG}"
#: what follows the timeout's words in the answer to the ranks that wait
NOT_FAILED = (
    "the job is not failed: a rank late to start (a restart's back-off) may still come, and a "
    "worker waiting for it says hello again"
)
#: what a worker's error says where a shard never answered its hello (the worker's wait, in
#: :mod:`~distconv.sync.ps.channel`): that shard was down or still starting (a pod the kubelet
#: restarts under its back-off), no failure of the rank's own
SHARD_SILENT_AT_HELLO = no_answer_words("hello")


class LateJobCheck:
    """The start-up side of the timeouts of :class:`~distconv.sync.ps.server.Shard` (a mixin):
    :meth:`~distconv.sync.ps.losses.WorkerLosses._check_timeouts` asks it
    (:meth:`_answered_late`) before it fails the job on a held request past the timeout, after
    its look at the ranks' processes and silence."""

    index: int
    config: Any
    waiting: dict[str, _Waiting]
    gathers_held: set[str]
    left: set[int]
    bye_error: dict[int, str | None]
    met_at: int
    accepted_at: dict[int, int]
    refused_at: dict[int, tuple[int, int | None]]
    incarnations: dict[int, Incarnation | None]
    run_of: dict[int, int | None]
    setup_of: dict[tuple[int, int | None], int]
    accepted_setup: dict[int, int]
    _blamed: Callable[[Iterable[int]], list[int]]
    _refusal_lead: Callable[[Iterable[int]], tuple[str, dict[str, str]]]
    _standing_note: Callable[[int], str | None]
    _other_id: Callable[[int, float], str | None]
    _other_job: Callable[[int], str | None]
    _in_other_gathers: Callable[[str], dict[int, str]]
    _drop_gather: Callable[[str], None]
    _dismiss: Callable[..., None]

    def _answered_late(self, key: str, missing: list[int], said: str, failed: set[int]) -> bool:
        """Whether held request ``key`` is the job check, past ``--timeout``, that the
        ``missing`` ranks are only late to (:meth:`_only_late`); if so, it is answered now: the
        ranks that wait are told the timeout's words ``said`` and that nothing failed, with
        ``failed_ranks`` (``failed``, as the failure would have named) and ``late``, and held no
        more. Else the timeout's own rule decides (a failure, or a loss in async mode)."""
        if key != JOB_CHECK_KEY or not missing or not self._only_late(key, missing):
            return False
        if self._answered_refused(key, missing, said):
            return True
        held = self.waiting[key]
        words = f"{said}; {NOT_FAILED}"
        log.warning("shard %d: %s", self.index, words)
        self._drop_gather(key)
        late = {LATE_FIELD: missing}
        self._dismiss(held.by_rank.values(), words, failed_ranks=sorted(failed), **late)
        return True

    def _answered_refused(self, key: str, missing: list[int], said: str) -> bool:
        """Whether one of the ``missing`` ranks of the job check ``key``, past ``--timeout``,
        never comes to it because its hello of this setup was refused as another job (a rate
        set between fits on some ranks only) while its worker lives on (a notebook's kernel:
        no ``bye``, which would have told the ranks that wait at once); if so, they are told
        that refusal now, as a refusal of the job (``refused: "job"``, no rank blamed), and
        held no more. Nothing fails: the refused rank is no late one to say hello again for
        (ten rounds, then blaming a late rank), and the shards serve the next ``fit`` of every
        rank, its rate set alike."""
        held = self.waiting[key]
        refused = [w for r in missing if (w := self._refused_of(r, held.by_rank)) is not None]
        if not refused:
            return False
        words = f"{refused[0]}; {said} (its hello was refused: it joins no job check of this setup)"
        log.warning("shard %d: %s", self.index, words)
        self._drop_gather(key)
        self._dismiss(held.by_rank.values(), words, **REFUSED_JOB)
        return True

    def _refused_of(self, rank: int, waiting: Iterable[int]) -> str | None:
        """The words of ``rank``'s latest hello, refused as another job (:meth:`_other_job`),
        where it was of the setup the ``waiting`` ranks' accepted hellos are of (its worker's
        setup since the seed: :meth:`~distconv.sync.ps.startup.StartupHandlers._count_setup`);
        else None. A refusal of an earlier setup says nothing of this one: its rank, fixed
        since, may only be late to it (a notebook's next ``fit``, run a cell at a time)."""
        said = self._other_job(rank)
        setup = self.setup_of.get((rank, self.run_of.get(rank)))
        if said is None or setup not in {self.accepted_setup.get(q) for q in waiting}:
            return None
        return said

    def _only_late(self, key: str, missing: list[int]) -> bool:
        """Whether the ``missing`` ranks of the job check ``key`` are only late to it: none
        waits in another gather (the ranks are at different points of the job), no step is
        held (a run under way, which the job check cannot be of), none was refused since its
        latest accepted hello, claimed by a worker of another job's id or left on the ranks'
        different jobs (a refusal, which no wait mends), and none failed in this start of the
        job: a failure note that stands, or a close on an error of its own
        (:meth:`_failed_this_start`), which are its errors, not a delay. (Async mode's
        stragglers, which ``--on-worker-loss continue`` loses at the timeout, never come here.)"""
        if set(self._in_other_gathers(key)) & set(missing):
            return False
        if len(self.waiting) > len(self.gathers_held):
            return False
        if self._refusal_lead(missing)[0]:
            return False
        return not any(
            self._refused(r, key) or self._standing_note(r) or self._failed_this_start(r)
            for r in missing
        )

    def _refused(self, rank: int, key: str) -> bool:
        """Whether ``rank``'s latest hello was refused (another job's, a malformed one), or a
        worker of another job's id claimed it since, within ``--timeout`` before held request
        ``key`` began (as the timeout's words name it: ``_why``)."""
        if self.refused_at.get(rank, (-1,))[0] > self.accepted_at.get(rank, -1):
            return True
        return self._other_id(rank, self.waiting[key].since - self.config.timeout) is not None

    def _failed_this_start(self, rank: int) -> bool:
        """Whether ``rank``'s worker closed on an error of its own (its ``bye``'s error, not
        another rank's failure nor the ranks' different jobs: :meth:`_blamed`) in this start
        of the job: after its latest accepted hello, the ranks not met since (a worker of the
        run before, closing as a shard was killed mid-run, is one whose restart is what is
        late), and of no earlier start than another rank's latest hello (a launcher's restart
        of every worker since: :func:`~distconv.sync.ps.incarnations.older`), as for a failure
        note that stands. The ranks waiting for it are failed at the timeout, naming its error,
        as before: waiting ten rounds more for a rank that failed only delayed the stop. A
        hello that another shard never answered (:meth:`_gave_up_on_a_shard`) is no such
        error."""
        if rank not in self.left or self._blamed([rank]) != [rank]:
            return False
        if self._gave_up_on_a_shard(rank):
            return False
        if self.met_at > self.accepted_at.get(rank, -1):
            return False
        own = self.incarnations.get(rank)
        return not any(older(own, theirs) for theirs in self.incarnations.values())

    def _gave_up_on_a_shard(self, rank: int) -> bool:
        """Whether ``rank``'s worker closed because a shard never answered its hello
        (:data:`SHARD_SILENT_AT_HELLO`): that shard was down, as after a shard killed mid-run
        and restarted slower than the worker's wait, which is no failure of the rank's own: its
        restart, once that shard is up, is what the ranks wait for. Neither the stuck check
        (:meth:`~distconv.sync.ps.gathers.ShardGathers._check_stuck`) nor the timeout counts
        such a rank as failed; one that never comes stops the waiting ranks after the rounds
        (:mod:`~distconv.sync.ps.late_ranks`)."""
        return SHARD_SILENT_AT_HELLO in (self.bye_error.get(rank) or "")
