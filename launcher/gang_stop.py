"""The stop of an attempt's children (:class:`launcher.supervisor.Supervisor`'s): workers
first, then servers, and SIGKILL to whatever is left at the grace's end or at a stop signal to
the launcher that asks to stop now (:mod:`launcher.second_signal`); one that repeats the first
stop is said, once, and changes nothing."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

from .arrivals import Arrivals
from .child import Child, running_groups
from .failure import signal_name
from .gang import any_running, killed_at_the_end, send_stop_signals
from .second_signal import same_stop
from .stopped_processes import StopFindings


def stop_gang(
    children: list[Child],
    grace: float,
    poll: float,
    arrivals: Arrivals,
    say: Callable[[str], None],
    cause: str | None = None,
    find_stopped: bool = True,
) -> StopFindings:
    """Workers, then servers: each group's stop signals, the servers' once the workers' groups
    are empty; SIGKILL to all at ``grace`` seconds, or at a signal asking to stop now. The
    signals go before any message (whose stream may be stalled): ``cause``, the stop's, said
    once the workers were signalled (None: said before, or by the caller).

    Returns:
        The processes it found stopped before its SIGCONT let them run, for the attempt's
        failure (:func:`~launcher.stopped_blame.as_found`); none looked for without
        ``find_stopped`` (no failure to report: ``/proc`` is not read).
    """
    deadline = time.monotonic() + grace
    servers = [c for c in children if c.spec.role == "server"]
    workers = [c for c in children if c not in servers]
    findings = StopFindings(children, looks=find_stopped)
    send_stop_signals(workers, findings)
    if cause is not None:
        say(cause)
    _wait_gone(workers, deadline, poll, arrivals, say)
    servers_at = time.monotonic()
    send_stop_signals(servers, findings)
    _wait_gone(servers, deadline, poll, arrivals, say)
    running = running_groups()
    left = [c for c in children if c.group_alive(running)]
    for child in children:
        child.signal_group(signal.SIGKILL)
    now = arrivals.stop_now()
    if left and now is not None:  # the user asked for it: still, never a silent kill
        names = ", ".join(c.spec.name for c in left)
        say(f"got {signal_name(now)} during the stop: {names} killed without the rest of the grace")
    elif left:  # the grace ran out
        say(killed_at_the_end(left, servers, grace, time.monotonic() - servers_at))
    return findings


def say_repeat(arrivals: Arrivals, say: Callable[[str], None]) -> None:
    """Say that a stop signal repeated the first stop, where one did and it is not said yet."""
    if (again := arrivals.repeat_to_say()) is not None:
        say(same_stop(signal_name(again)))


def _wait_gone(
    children: list[Child],
    deadline: float,
    poll: float,
    arrivals: Arrivals,
    say: Callable[[str], None],
) -> None:
    """Until no process of ``children``'s groups runs, the deadline, or a signal asking to
    stop now; a repeat of the first stop said meanwhile."""
    while True:
        say_repeat(arrivals, say)
        if not any_running(children):
            return
        if time.monotonic() > deadline or arrivals.stop_now() is not None:
            return  # out of patience, or the user signalled again: kill now
        time.sleep(poll)
