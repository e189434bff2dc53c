"""Which start of the job a worker's ``hello`` comes from: its launch's incarnation.

A launcher that restarts every worker of a job together (``distconv-launch local
--max-restarts N``) tells each its launch (``DISTCONV_LAUNCH``: a token, one per invocation
of the launcher) and restart count (``DISTCONV_RESTART``). A worker sends the two in its
``hello`` as ``incarnation``: ``[launch, restart]``. A shard that outlives the workers' restarts
(shards started by hand, which a ``--servers 0`` launch's scripts name) needs it for two
things: to refuse a hello of an earlier restart than its rank's hello before (a hello left in
flight as the launcher stopped its worker, or a process that outlived its stop, would otherwise
take the rank back from its newer worker: :mod:`~distconv.sync.ps.startup`), and for a failure
note (:mod:`~distconv.sync.ps.setup_notes`): a note of restart 0 that a rank killed before its
job check was never told of stood on, and the rank's worker of restart 1 was refused with it at
its first job check, though the noted rank's worker of restart 1 had not said hello yet (and
set up), which cost the job a needless restart. At the shard, that stale note and a note of the
same restart that a slow rank must still be told of (else it waits out ``--timeout``) differ
only in their incarnations.

Restart counts are compared only within one launch: two launches (one per rank, or a
launch of the job again) count their restarts apart. A hello without the field (a worker
started by hand, or by an older distconv) compares with none.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from distconv.launch_env import ENV_LAUNCH, launch_id, restart_count
from distconv.runtime import RuntimeConfigError
from distconv.sync.ps.wire import WireError, short

#: a worker's launch and restart count: ``(DISTCONV_LAUNCH, DISTCONV_RESTART)``
Incarnation = tuple[str, int]
#: the most characters of a launch token a hello may carry (the launcher's: 16 hex digits)
LAUNCH_CHARS = 64


def incarnation_field(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``incarnation`` field of a worker's hello, ``{"incarnation": [launch, restart]}``,
    where a launcher started this process (``DISTCONV_LAUNCH`` set); else, or where its
    ``DISTCONV_RESTART`` is not a count (refused where the run starts, said there), none."""
    env = os.environ if environ is None else environ
    launch = launch_id(env)
    if launch is None or not _launch_ok(launch):
        return {}
    try:
        return {"incarnation": [launch, restart_count(env)]}
    except RuntimeConfigError:
        return {}


def hello_incarnation(header: Mapping[str, Any]) -> Incarnation | None:
    """The incarnation a hello carries, or None where it carries none.

    Raises:
        WireError: a field that is not ``[launch, restart]``: ``launch`` 1 to
            :data:`LAUNCH_CHARS` printable characters, ``restart`` an integer >= 0.
    """
    if "incarnation" not in header:
        return None
    value = header["incarnation"]
    if (
        type(value) is list
        and len(value) == 2
        and type(value[0]) is str
        and _launch_ok(value[0])
        and type(value[1]) is int
        and value[1] >= 0
    ):
        return value[0], value[1]
    raise WireError(
        f"hello: incarnation {short(value)} is not [launch, restart]: {ENV_LAUNCH}'s token "
        f"(1 to {LAUNCH_CHARS} printable characters) and a restart count (an integer >= 0)"
    )


def _launch_ok(launch: str) -> bool:
    return 0 < len(launch) <= LAUNCH_CHARS and launch.isprintable()


def differ(a: Incarnation | None, b: Incarnation | None) -> bool:
    """Whether ``a`` and ``b`` are known to be two starts of the job: both given, of one
    launch, with different restart counts."""
    return a is not None and b is not None and a[0] == b[0] and a[1] != b[1]


def older(a: Incarnation | None, b: Incarnation | None) -> bool:
    """Whether ``a`` is known to be an earlier start of the job than ``b`` (one launch)."""
    return differ(a, b) and a[1] < b[1]  # type: ignore[index]
