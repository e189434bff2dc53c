"""How long a rank's startup probe on ``/readyz`` holds liveness off beside the shards: one
formula, which the renderer writes into a worker's probe (:mod:`distconv.deploy.pod`) and
``distconv check-manifests`` holds a worker's probe edited by hand to
(:mod:`distconv.deploy.check_startup_window`).

A worker whose peers are late to the start-up job check says hello again for up to
``JOB_CHECK_ROUNDS`` rounds, each one of the shards' ``--timeout``, its ``/readyz`` at 503 all
that while (:mod:`distconv.sync.ps.late_ranks`). A startup probe that gives up sooner has the
kubelet restart a worker that waits as designed, and each restart counts against the Job's
``backoffLimit``.
"""

from __future__ import annotations

import math

#: the least a rank's startup probe on /readyz waits (periods x failures) for peers and
#: seeding: twice a worker's wait for ranks late to the start-up job check at the shards'
#: default ``--timeout`` (``JOB_CHECK_ROUNDS``, 10, x 60 s); a longer ``--timeout`` lengthens
#: it (:func:`startup_seconds`)
STARTUP_SECONDS = 1200
#: a rank's startup probe's period: its window is a whole number of them
STARTUP_PERIOD = 10


def startup_seconds(shards_timeout: float, period: int = STARTUP_PERIOD) -> int:
    """How long a worker's startup probe of ``period`` s holds liveness off beside shards of
    ``shards_timeout`` s: twice a worker's longest wait for ranks late to the start-up job
    check (``JOB_CHECK_ROUNDS`` x ``shards_timeout``), so that its start, its data and the
    seeding fit beside it, in whole periods; no less than :data:`STARTUP_SECONDS`, and no more
    failures than the API server's int32 ``failureThreshold`` holds (a ``--timeout`` of a
    billion seconds rendered a Job that ``kubectl apply`` could not decode)."""
    return period * startup_failures(shards_timeout, period)


def startup_failures(shards_timeout: float, period: int = STARTUP_PERIOD) -> int:
    """The ``failureThreshold`` of a worker's startup probe of ``period`` s beside shards of
    ``shards_timeout`` s (:func:`startup_seconds`)."""
    from distconv.deploy.counts import MAX_COUNT  # which imports the pod pieces, and so this

    wanted = 2 * late_rank_seconds(shards_timeout) / period  # inf past ~9e306 s: no ceil
    periods = MAX_COUNT if wanted >= MAX_COUNT else math.ceil(wanted)
    return min(max(math.ceil(STARTUP_SECONDS / period), periods), MAX_COUNT)


def late_rank_seconds(shards_timeout: float) -> float:
    """A worker's longest wait for ranks late to the start-up job check beside shards of
    ``shards_timeout`` s: ``JOB_CHECK_ROUNDS`` of it."""
    from distconv.sync.ps.late_ranks import JOB_CHECK_ROUNDS

    return JOB_CHECK_ROUNDS * shards_timeout
