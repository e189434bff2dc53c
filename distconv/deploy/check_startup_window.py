"""A worker's startup probe beside the shards' ``--timeout`` (part of
:func:`distconv.deploy.check.manifest_problems`, through
:func:`~distconv.deploy.check_timeouts.timeout_problems`, which reads the shards' seconds).

A worker whose peers are late to the start-up job check waits for them up to
``JOB_CHECK_ROUNDS`` of the shards' ``--timeout``, its ``/readyz`` at 503. The renderer gives its
startup probe twice that (:mod:`distconv.deploy.startup_window`); a ``--timeout`` raised by
hand on both sides, as the docs invite, left the probe's window as rendered, and the kubelet
would restart workers that wait as designed, each restart counted against the Job's
``backoffLimit``. A window longer than that wait passes, though shorter than a render's (its
margin for the worker's start, data and seeding, which a hand-sized probe may know better); the
window counts the probe's ``initialDelaySeconds``. A probe whose period, failure count or delay
is no integer is not judged here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from distconv.deploy.counts import known_count
from distconv.deploy.programs import trains_with_the_shards
from distconv.deploy.startup_window import late_rank_seconds, startup_failures
from distconv.deploy.walk import Manifest, _here, _running

if TYPE_CHECKING:
    from distconv.deploy.check_timeouts import Timeout

#: what the API server takes for a probe's fields left out
DEFAULT_PERIOD, DEFAULT_FAILURES = 10, 3


def short_startup_windows(objs: Sequence[Manifest], shards: Sequence[Timeout]) -> Iterator[str]:
    """Each rank that reaches the shards whose startup probe holds liveness off for no longer
    than a worker's wait for ranks late to the start-up job check beside the longest of the
    shards' ``--timeout`` (``shards``: each as its shard reads it, written or its default), with
    the ``failureThreshold`` a render gives at the probe's own period. ``shards`` are those
    whose ``--timeout`` agrees with their workers': one that does not is named on its own, and
    the window judged once the two agree."""
    if not shards:
        return
    shard = max(shards, key=lambda s: s.seconds)
    for _, where, _, container, _ in _running(objs, "train"):
        probe = container.get("startupProbe")
        if not isinstance(probe, dict) or not trains_with_the_shards(container):
            continue
        period = known_count(probe, "periodSeconds", DEFAULT_PERIOD)
        failures = known_count(probe, "failureThreshold", DEFAULT_FAILURES)
        delay = known_count(probe, "initialDelaySeconds", 0)
        if period is None or failures is None or delay is None or period < 1:  # refused by the
            continue  # API server, or the cluster's to fill in
        window, needed = delay + period * failures, startup_failures(shard.seconds, period)
        wait = late_rank_seconds(shard.seconds)
        # past the API server's largest failureThreshold no window outlasts the wait: the
        # largest is the best there is
        if window <= wait and failures < needed:
            held = f"initialDelaySeconds {delay} + " if delay else ""
            yield (
                f"{_here(where, container)}: startupProbe holds liveness off for "
                f"{window} s ({held}periodSeconds {period} x failureThreshold {failures}), "
                f"but beside {shard.here} (--timeout {shard.said()}) a worker waits up to "
                f"{_seconds(wait)} for ranks late to the start-up job "
                "check, its /readyz at 503, and the kubelet would restart it as it waits: give "
                f"failureThreshold {needed} ({period * needed} s), as a rendered job's workers "
                "are given at that --timeout"
            )


def _seconds(wait: float) -> str:
    """A worker's wait in seconds as a line says it: ``200 s``; past the largest float (10
    rounds of a ``--timeout`` of ``1e308``), more than that, not ``inf s``."""
    return f"{wait:g} s" if wait <= sys.float_info.max else f"more than {sys.float_info.max:g} s"
