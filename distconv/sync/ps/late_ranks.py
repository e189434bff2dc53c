"""A worker whose start-up job check other ranks came late to says ``hello`` again, for a
bounded time, instead of exiting.

Shard 0 answers a setup's job check (``all_equal:1``) that ranks did not come to within its
``--timeout`` with their names in ``late`` (:mod:`~distconv.sync.ps.late_job_check`), and fails
nothing. A worker that exited on it was restarted under its own back-off (the kubelet's 10, 20,
40 s ...), out of phase with the others, and with a short ``--timeout`` the ranks never met
again. So the worker stays, and says hello and makes its job check again
(:meth:`LateRankRetries._hello_and_check`), each time logging the ranks it waits for, until
they come or shard 0 has answered so :data:`JOB_CHECK_ROUNDS` times (each round one
``--timeout`` of the shard's: the shard, not the worker, decides when a round ends); then it
stops on the shard's words, which name the late ranks (``PeerFailed``, exit 75), as it stopped
at once before. A stop asked meanwhile (SIGTERM, Ctrl-C) ends the waiting at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from distconv import stop_request
from distconv.straggler_words import NO_ANSWER_FROM
from distconv.sync.peers import PeerFailed
from distconv.sync.ps.stuck import wait_words

log = logging.getLogger("distconv.pserver")

#: the field of shard 0's error reply to a job check that names the ranks late to it: the job
#: was not failed, so a worker waiting for them may say hello again (docs/protocol.md)
LATE_FIELD = "late"
#: how many times a worker makes its job check while shard 0 says ranks are late to it, each
#: a wait of the shard's --timeout: enough for a rank whose restart the kubelet's back-off holds
#: back (with --timeout 20, 200 s), and bounded where a rank never comes
JOB_CHECK_ROUNDS = 10


def no_answer_words(what: str) -> str:
    """How a worker's error begins (after its rank) where shards never answered its ``what``
    (the wait in :mod:`~distconv.sync.ps.channel`); shard 0 looks for the hello's in a closing
    worker's error (:data:`~distconv.sync.ps.late_job_check.SHARD_SILENT_AT_HELLO`), so both
    take them from here, and the launcher reads them back to blame the shard (its words
    :data:`~distconv.straggler_words.NO_ANSWER_FROM`)."""
    return f"no answer to {wait_words(what)} {NO_ANSWER_FROM}"


class RanksLate(PeerFailed):
    """Shard 0 answered this worker's job check naming ranks that did not come to it within
    its ``--timeout`` (:attr:`ranks`), without failing the job: they may still come."""


class LateRankRetries:
    """The job check of :meth:`~distconv.sync.ps.client.PServerSync.setup` that waits for late
    ranks (a mixin): it reads ``rank`` and the shards' timeouts, and calls the sync's
    ``_hello``, ``_check_sizes`` and ``all_equal``."""

    rank: int
    _frame_bytes: list[int]
    _shard_timeouts: dict[int, float]  # each shard's --timeout, from its hello reply
    _hello: Callable[[dict[str, Any]], list[dict[str, Any]]]
    _check_sizes: Callable[[list[int]], None]
    all_equal: Callable[[Mapping[str, Any]], None]

    def _hello_and_check(self, description: dict[str, Any]) -> list[dict[str, Any]]:
        """Say hello and make the job check, again while shard 0 says ranks are late to it,
        up to :data:`JOB_CHECK_ROUNDS` times; the shards' hello replies.

        Raises:
            RanksLate: the late ranks did not come in those rounds, or a stop was asked.
        """
        began = time.monotonic()
        for attempt in range(1, JOB_CHECK_ROUNDS + 1):
            heads = self._hello(description)
            self._check_sizes(self._frame_bytes)  # this layout (fail_setup's hello has none)
            try:
                self.all_equal(description)
                return heads
            except RanksLate as exc:
                waited = time.monotonic() - began
                if attempt == JOB_CHECK_ROUNDS:
                    raise RanksLate(self._gave_up(exc, waited), exc.ranks) from None
                if stop_request.pending() is not None:  # the run ends: wait for nobody
                    raise
                log.warning(
                    "rank %d: ranks late to the job check, saying hello again (round %d of "
                    "%d, %.0f s waited%s): %s",
                    *(self.rank, attempt + 1, JOB_CHECK_ROUNDS, waited, self._bound(), exc),
                )
        raise AssertionError("the last round returns or raises")  # for the type checker

    def _bound(self) -> str:
        """How long the rounds take in all, at most, where shard 0's hello reply said its
        ``--timeout`` (each round's length): the words after a round's ``S s waited``."""
        limit = self._shard_timeouts.get(0)
        if limit is None:  # a shard that says none sends no ``late`` either
            return ""
        total = JOB_CHECK_ROUNDS * limit
        return f" of about {total:.0f} s at most: shard 0's --timeout {limit:g} s a round"

    def _gave_up(self, exc: RanksLate, waited: float) -> str:
        """The words this worker stops on: shard 0's, less their clause that a worker waiting
        for the late ranks says hello again (this one no longer does: both in one line left a
        reader unsure whether to wait), then how long it waited and the way out."""
        from distconv.sync.ps.late_job_check import NOT_FAILED  # (it imports this module)

        before, _, after = str(exc).partition(f"; {NOT_FAILED}")
        return (
            f"{before}{after}; this worker made its job check {JOB_CHECK_ROUNDS} times over "
            f"{waited:.0f} s, and the ranks late to it never came: the job cannot start without "
            f"them; start them, or raise the shards' --timeout to 1/{JOB_CHECK_ROUNDS} of the "
            "longest a rank may take to start"
        )
