"""The shards' ``--timeout`` beside their workers' (part of
:func:`distconv.deploy.check.manifest_problems`): a rendered job gives both the same one.

A shard holds a step or a gather for its ``--timeout`` until every worker has come, then fails
it naming the worker that never came; a worker waits ``GRACE`` (1.5) x its own ``--timeout``
for a shard's reply. Where the shards wait as long or longer, a worker that never comes is
blamed on a healthy shard, and named only in the shard's log. The renderer gives the shards
the workers' ``--timeout`` (:mod:`distconv.shard_timeout`); a StatefulSet edited since
(``--timeout 120`` beside workers of 20, or none, which leaves the shards their 60 s) is named
here by the rule, and in the words, of the warning each worker logs at setup
(:mod:`distconv.sync.ps.shard_timeouts`). Shards edited to another ``--timeout`` that does not
outwait the workers are named too: shorter, they fail a step or a gather that a worker comes
to within the workers' ``--timeout``; longer, they name a worker that never comes later than
the workers asked. So are workers whose ``--timeout`` is below a shard's least, which the
renderer and ``distconv-launch local`` refuse in the same words
(:func:`~distconv.shard_timeout.below_the_shards_least`). A value only the cluster knows (a
``$(VAR)`` filled in at run time, a token where a flag may go, which may hold it) is not judged,
nor is a command line refused, which the shards' and ranks' own checks name.

How a rank reads its seconds (:func:`rank_seconds`) is shared with the MPIJob's watchdog check
(:mod:`distconv.deploy.check_mpi`); the shards' seconds read here also judge the workers'
startup probe (:mod:`distconv.deploy.check_startup_window`).
"""

from __future__ import annotations

import functools
import inspect
from argparse import ArgumentTypeError
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from distconv.deploy.check_probes import _loose, may_hold_a_flag
from distconv.deploy.check_ranks import _as_read
from distconv.deploy.check_shards import (
    expand,
    pserver_parser,
    shard_argv_problem,
    shard_flag,
)
from distconv.deploy.check_startup_window import short_startup_windows
from distconv.deploy.programs import trains_with_the_shards
from distconv.deploy.walk import Manifest, _flag, _here, _running
from distconv.shard_timeout import below_the_shards_least, exact_text, shard_timeout
from distconv.train_flag_types import positive_float

#: what :func:`~distconv.deploy.walk._running` yields: object, where, pod template, container,
#: the arguments after ``distconv <command>``
Run = tuple[Manifest, str, Manifest, Manifest, list[str]]


class Timeout(NamedTuple):
    """One side's ``--timeout`` as its processes take it."""

    #: how a problem names the container (``StatefulSet j-pserver container pserver``)
    here: str
    seconds: float
    #: not written: the process's own default
    default: bool

    def said(self) -> str:
        """The value as a problem gives it: ``20``, ``60, the default``."""
        return f"{self.seconds:g}{', the default' if self.default else ''}"


def timeout_problems(objs: Sequence[Manifest]) -> Iterator[str]:
    """Workers whose ``--timeout`` is below a shard's least, shards whose ``--timeout`` is not
    their workers' (outlasting the workers' wait, or other than it), and workers whose startup
    probe ends before their wait for ranks late at the shards' ``--timeout``
    (:mod:`~distconv.deploy.check_startup_window`)."""
    shards = [s for s in map(_shards_timeout, _running(objs, "pserver")) if s is not None]
    workers = [w for w in map(_workers_timeout, _running(objs, "train")) if w is not None]
    for worker in workers:
        why = None if worker.default else below_the_shards_least(worker.seconds)
        if why is not None:
            yield f"{worker.here}: {why}"
    agreeing = []
    for shard, world in shards:
        named = [_outwaited(shard, world, w) or _disagreeing(shard, world, w) for w in workers]
        yield from filter(None, named)
        if not any(named):  # else the window would echo a --timeout named to be changed
            agreeing.append(shard)
    yield from short_startup_windows(objs, agreeing)


def _outwaited(shard: Timeout, world: int, worker: Timeout) -> str | None:
    """Why ``shard``'s wait for every worker of ``world`` outlasts ``worker``'s wait for its
    reply, as each worker warns at setup; None where it does not. Shards at their least beside
    workers of a shorter ``--timeout`` (:func:`~distconv.shard_timeout.shard_timeout`) are not
    named here: no shorter shard would start, and the workers are named on their own."""
    from distconv.sync.ps.channel import GRACE  # zmq: where a job has shards and workers
    from distconv.sync.ps.shard_timeouts import blamed_on_shard, outwaited_fix, outwaiting

    limit = worker.seconds * GRACE
    if not outwaiting({0: shard.seconds}, limit, world):
        return None
    if shard.seconds == shard_timeout(worker.seconds):
        return None
    return (
        f"{shard.here}: the shards wait up to {shard.seconds:g} s (their --timeout"
        f"{', the default' if shard.default else ''}) for every worker, and the workers of "
        f"{worker.here} wait {limit:g} s "
        f"for a shard's reply ({GRACE:g} x their --timeout {worker.said()}): "
        f"{blamed_on_shard('by the workers')}; {outwaited_fix(shard.seconds, limit)}"
    )


def _disagreeing(shard: Timeout, world: int, worker: Timeout) -> str | None:
    """Why ``shard``'s ``--timeout``, other than ``worker``'s but not outwaiting it
    (:func:`_outwaited`), is no less wrong, in a job of two workers or more, where a shard
    waits for the others; None where the two agree, or where the workers' is below a shard's
    least, named for the workers alone."""
    if world < 2 or shard.seconds == worker.seconds:
        return None
    if below_the_shards_least(worker.seconds) is not None:
        return None
    if shard.seconds < worker.seconds:
        why = (
            f"a shard fails a step or a gather that a worker comes to more than "
            f"{shard.seconds:g} s after the others, sooner than the workers' --timeout allows"
        )
    else:
        why = (
            f"a worker that never comes is named only {shard.seconds:g} s in, later than the "
            "workers' --timeout asks"
        )
    return (
        f"{shard.here}: the shards' --timeout ({shard.said()}) is not that of the workers of "
        f"{worker.here} ({worker.said()}): {why}; give the shards --timeout "
        f"{exact_text(worker.seconds)}, as a rendered job's shards are given their workers'"
    )


def _shards_timeout(run: Run) -> tuple[Timeout, int] | None:
    """The ``--timeout`` of the shards ``run`` starts and how many workers they wait for
    (``--workers``), as ``distconv pserver`` reads them; None where it cannot be told."""
    _, where, _, container, args = run
    if shard_argv_problem(args, container) is not None or _loose("pserver", args, container):
        return None
    given, text = shard_flag(args, container, "timeout")
    _, workers = shard_flag(args, container, "workers")
    if (given and text is None) or workers is None:  # only the cluster knows
        return None
    seconds = float(text) if given else float(pserver_parser().get_default("timeout"))
    return Timeout(_here(where, container), seconds, not given), int(workers)


def _workers_timeout(run: Run) -> Timeout | None:
    """The ``--timeout`` of the ranks ``run`` starts, where they sync through the shards, as
    ``distconv train`` reads it (:func:`rank_seconds`); None where it cannot be told."""
    _, where, _, container, args = run
    read = rank_seconds(args, container, "--timeout") if trains_with_the_shards(container) else None
    if read is None:
        return None
    (seconds,) = read
    here = _here(where, container)
    if seconds is None:  # not written: the sync's own default
        return Timeout(here, _worker_default(), True)
    return Timeout(here, seconds, False)


def rank_seconds(args: list[str], container: Manifest, *flags: str) -> list[float | None] | None:
    """The seconds ``distconv train`` reads for each of ``flags`` from ``args`` (after
    ``train``), however written (``--time 20``, ``--timeout=20``, the last of several), with
    ``$(VAR)`` filled in as the kubelet passes it; None for a flag not written. None for them
    all where they cannot be told here: a flag wrong or a value refused (named by the ranks'
    own checks), a value only the cluster knows, or a ``$(VAR)`` where a flag may go, written
    or not: it may hold any of them (``--timeout=1``), and the last one written is the one
    read. (A ``$(VAR)`` before the flag written could not change it: not told apart here.)"""
    train, wrong = _as_read(args)
    if wrong is not None or may_hold_a_flag(train):
        return None
    values: list[float | None] = []
    for flag in flags:
        text = _flag(train, flag, last=True)
        if text is None and flag in train:  # last, with no value: refused, not the default
            return None
        if text is None:
            values.append(None)
            continue
        try:  # a value only the cluster knows (its stand-in), or an undefined $(VAR), is no number
            values.append(positive_float(expand(text, container)))
        except ArgumentTypeError:
            return None
    return values


@functools.cache
def _worker_default() -> float:
    """The ``timeout`` a worker of the shards takes where ``distconv train`` gives none: the
    sync's own default, read from it so that the two cannot drift."""
    from distconv.sync.ps.client import PServerSync  # numpy, zmq: for jobs with shards

    return float(inspect.signature(PServerSync).parameters["timeout"].default)
