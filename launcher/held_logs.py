"""The end of a launch for the children whose output held their pumps past their attempt: what
their pipes still hold goes into their logs, bounded (:func:`drain_held`), from
:meth:`launcher.supervisor.Supervisor._drain_logs`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .shown import shown

if TYPE_CHECKING:
    from .child import Child

#: seconds the launcher's end waits, in all, for the pipes its output held up to end into the
#: children's logs (:func:`drain_held`)
END_DRAIN_SECONDS = 2.0


def drain_held(pumping: Sequence[Child], say: Callable[..., None]) -> None:
    """What the pipes of ``pumping`` (children whose pumps were held past their attempt) still
    hold, into their logs, up to :data:`END_DRAIN_SECONDS` in all: the pipe's end, or what it
    holds now where a process outside the child's group keeps it open for good
    (:meth:`~launcher.long_line.OutputPipe.drain`). The pumps are daemons, and each log must
    be the whole record though the launcher's output took none of it. A pipe not drained by
    then is said (``say(message, level=...)``). A second stop signal does not cut it short: it
    is the record's (the logs must hold every line; only the output's view may be cut), and
    bounded."""
    deadline = time.monotonic() + END_DRAIN_SECONDS
    for child in pumping:
        if not child.drain_log(max(0.0, deadline - time.monotonic())):
            say(
                f"{child.spec.name}: its pipe was not drained within {END_DRAIN_SECONDS:g} s "
                f"of the job's end, so {shown(child.log_path)} lacks what it still held",
                level="warning",
            )
