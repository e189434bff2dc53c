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
step is held, none left on the ranks' different jobs), shard 0 answers the ranks that wait with
the timeout's words, the late ranks in ``failed_ranks`` and ``late``, and fails nothing: the
late ranks may still come, and a worker that waits says ``hello`` again
(:mod:`~distconv.sync.ps.late_ranks`), for a bounded time. A worker of a release before
``late`` stops on the reply as it stopped on the failure (``failed_ranks``: exit 75).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from distconv.sync.ps.late_ranks import LATE_FIELD
from distconv.sync.ps.state import _Waiting
from distconv.sync.ps.stuck import held_words

log = logging.getLogger("distconv.pserver")

#: the tag of a setup's job check: every setup's first gather (each hello numbers them anew)
JOB_CHECK_TAG = "all_equal:1"
#: what follows the timeout's words in the answer to the ranks that wait
NOT_FAILED = (
    "the job is not failed: a rank late to start (a restart's back-off) may still come, and a "
    "worker waiting for it says hello again"
)


class LateJobCheck:
    """The start-up side of the timeouts of :class:`~distconv.sync.ps.server.Shard` (a mixin
    placed before :class:`~distconv.sync.ps.losses.WorkerLosses`, whose
    ``_check_timeouts`` it runs after its own look at the job check)."""

    config: Any
    index: int
    failed: str | None
    waiting: dict[str, _Waiting]
    gathers_held: set[str]
    left: set[int]
    params: list[Any]
    accepted_at: dict[int, int]
    refused_at: dict[int, tuple[int, int | None]]
    _live: Callable[[], set[int]]
    _who: Callable[[int], str]
    _why: Callable[[list[int], str], str]
    _blamed: Callable[[Iterable[int]], list[int]]
    _refusal_lead: Callable[[Iterable[int]], tuple[str, dict[str, str]]]
    _stragglers: Callable[[str, list[int]], bool]
    _standing_note: Callable[[int], str | None]
    _other_id: Callable[[int, float], str | None]
    _in_other_gathers: Callable[[str], dict[int, str]]
    _drop_gather: Callable[[str], None]
    _dismiss: Callable[..., None]

    def _check_timeouts(self, now: float) -> None:
        """Answer a job check past the timeout that ranks are only late to
        (:meth:`_answer_late_job_check`), then look at every other wait as before."""
        self._answer_late_job_check(now)
        super()._check_timeouts(now)  # type: ignore[misc]

    def _answer_late_job_check(self, now: float) -> None:
        """Where the job check has waited past ``--timeout`` for ranks only late to it
        (:meth:`_only_late`), answer the ranks that wait, naming the late ones, and hold it no
        more; the job goes on (nothing failed)."""
        key = f"gather:{JOB_CHECK_TAG}"
        held = self.waiting.get(key)
        if self.failed or held is None or now - held.since <= self.config.timeout:
            return
        missing = sorted(self._live() - set(held.by_rank))
        if not missing or not self._only_late(key, missing):
            return  # the timeout's own rule decides (a failure, or a loss in async mode)
        gone = self.left.intersection(missing)
        failed = sorted(set(missing) - gone | set(self._blamed(gone)))  # as the timeout's
        words = (
            f"{', '.join(self._who(r) for r in missing)} sent nothing for "
            f"{held_words(held.what, key, self.params)} within {self.config.timeout:g} s"
            f"{self._why(missing, key)}; {NOT_FAILED}"
        )
        log.warning("shard %d: %s", self.index, words)
        self._drop_gather(key)
        self._dismiss(held.by_rank.values(), words, failed_ranks=failed, **{LATE_FIELD: missing})

    def _only_late(self, key: str, missing: list[int]) -> bool:
        """Whether the ``missing`` ranks of the job check ``key`` are only late to it: none
        waits in another gather (the ranks are at different points of the job), no step is
        held (a run under way, which the job check cannot be of), none was refused since its
        latest accepted hello, claimed by a worker of another job's id or left on the ranks'
        different jobs (a refusal, which no wait mends), none could not set up (a failure note
        that stands: its error, not a delay), and they are not the stragglers that async
        mode's ``--on-worker-loss continue`` loses at the timeout."""
        if set(self._in_other_gathers(key)) & set(missing):
            return False
        if any(self._refused(r, key) or self._standing_note(r) for r in missing):
            return False
        if len(self.waiting) > len(self.gathers_held):
            return False
        if self._refusal_lead(missing)[0]:
            return False
        return not self._stragglers(key, missing)

    def _refused(self, rank: int, key: str) -> bool:
        """Whether ``rank``'s latest hello was refused (another job's, a malformed one), or a
        worker of another job's id claimed it since, within ``--timeout`` before held request
        ``key`` began (as the timeout's words name it: :meth:`_why`)."""
        if self.refused_at.get(rank, (-1,))[0] > self.accepted_at.get(rank, -1):
            return True
        return self._other_id(rank, self.waiting[key].since - self.config.timeout) is not None
