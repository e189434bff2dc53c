"""Which launch and which restart of a job this process is, as ``distconv-launch`` tells it.

The launcher gives every process it starts ``DISTCONV_LAUNCH`` (a token, one per invocation
of the launcher, the same over its restarts) and ``DISTCONV_RESTART`` (how many times it has
started the job again). A run's record (:mod:`distconv.resume`), the logs and the probes
read them here; a process started by hand has neither, and is a first start.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from distconv.runtime import RuntimeConfigError

ENV_RESTART = "DISTCONV_RESTART"
ENV_LAUNCH = "DISTCONV_LAUNCH"


def restart_count(environ: Mapping[str, str] | None = None) -> int:
    """How many times the launcher has started this job again (``DISTCONV_RESTART``; 0 where
    it is not set, as on a job's first start).

    Raises:
        RuntimeConfigError: it is not an integer >= 0 (a negative count was logged and
            recorded as it came).
    """
    env = os.environ if environ is None else environ
    text = env.get(ENV_RESTART, "0")
    try:
        count = int(text.strip())
    except ValueError:
        count = -1
    if count < 0:
        raise RuntimeConfigError(f"{ENV_RESTART} must be an integer >= 0, got {text!r}")
    return count


def launch_id(environ: Mapping[str, str] | None = None) -> str | None:
    """The token of the ``distconv-launch`` invocation that started this process
    (``DISTCONV_LAUNCH``), or None."""
    env = os.environ if environ is None else environ
    return env.get(ENV_LAUNCH) or None
