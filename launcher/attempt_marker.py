"""The line that opens each attempt's part of a child's log.

A child's log (``logs/<role>-<rank>.log``) is opened for appending by every attempt of a launch,
and by every launch that reuses the run directory (``--job-id S`` again): their lines ran
together, so an error of restart 1 read as one of the first attempt, and a child with no line
in an attempt read as never started again. Each attempt's lines now begin with one marker
line, which a launch's first attempt words as a new launch.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from distconv.launch_env import ENV_LAUNCH, ENV_RESTART
from distconv.runtime import ENV_JOB_ID

#: the marker's frame: a line no distconv process writes
_FRAME = "---"


def attempt_marker(env: Mapping[str, str] | None, now: float | None = None) -> bytes | None:
    """The marker line (with its newline) for a child of the attempt ``env`` describes (the
    launcher's ``DISTCONV_JOB_ID``, ``DISTCONV_RESTART``, ``DISTCONV_LAUNCH``), started at
    ``now`` (seconds since the epoch; the present by default), in UTC:
    ``--- new launch L of job J: attempt 1, started 2026-12-07T20:34:57Z ---`` for the first
    attempt, ``--- launch L of job J: attempt 2 (restart 1), started ... ---`` for a restart.
    None for a child with no job id in ``env`` (not one a launch describes)."""
    if not env or not (job := env.get(ENV_JOB_ID)):
        return None
    try:
        restart = int(env.get(ENV_RESTART, "0"))
    except ValueError:
        restart = 0
    launch = f"launch {env[ENV_LAUNCH]}" if env.get(ENV_LAUNCH) else "launch"
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    attempt = f"attempt {restart + 1} (restart {restart})" if restart else "attempt 1"
    said = f"{'' if restart else 'new '}{launch} of job {job}: {attempt}, started {started}"
    return f"{_FRAME} {said} {_FRAME}\n".encode()
