"""Whether a sync closes on a failure: what a transport tells its peers as it closes."""

from __future__ import annotations

import sys

from distconv import stop_request
from distconv.stop_request import Preempted


def closing_error() -> BaseException | None:
    """The exception propagating while a sync closes (from a ``finally``; one being handled in
    an ``except`` clause counts too), or None, as for ``sys.exit(0)``: a clean end. So is a
    stop by signal (:class:`~distconv.stop_request.Preempted`) where ``run_main`` ends the
    script on it (:data:`~distconv.stop_request.preempted_ends_run`): every rank raises it at
    the step they agreed on; a script's ``try: fit() finally: sync.close()`` aborted the MPI
    job there, with every rank's traceback."""
    error = sys.exc_info()[1]
    clean_exit = isinstance(error, SystemExit) and error.code in (0, None)
    if clean_exit or (isinstance(error, Preempted) and stop_request.preempted_ends_run):
        return None
    return error
