"""The end of a job whose child reported it (:attr:`~launcher.child.Child.reported_end`:
mpiexec's report of its ranks' statuses) but did not exit: stopped as overdue, or reached by a
stop signal to the launcher while it stayed. Whether that end was a success
(:meth:`~launcher.child.Child.reported_success`) decides whether the attempt failed."""

from __future__ import annotations

from collections.abc import Sequence

from . import child as child_waits  # its wrap-up, as set when used (tests cut it)
from .child import Child
from .shown import shown


def first_overdue(
    children: Sequence[Child], every: float = 0.0
) -> tuple[Child | None, str, bool] | None:
    """The first of ``children`` that is :meth:`Child.overdue` (None where none is), looked at
    every ``every`` seconds: the attempt's failure, or None where stopping it ends an attempt
    that succeeded (:func:`_ended_well`); why it is stopped; and whether the attempt
    succeeded."""
    for child in children:
        line = child.overdue(every)
        if line is None:
            continue
        why = overdue_said(child, line)
        if _ended_well(child, children):
            return None, f"{why}; every rank had exited 0, so the attempt succeeded", True
        return child, why, False
    return None


def reported_before(children: Sequence[Child], at: float) -> tuple[Child | None, bool]:
    """Where a stop signal came at ``at`` (monotonic): the first of ``children`` running at it
    (exited since, too: a stop sent to every process, as systemd's, reaches mpiexec as well)
    that had reported its end before it (:attr:`Child.reported_end`), as the attempt's failure,
    or None; and whether that report ended an attempt that succeeded (:func:`_ended_well`)."""
    for child in children:
        running = child.exited_at is None or child.exited_at >= at
        if running and child.reported_end and child.reported_end[0] < at:
            return (None, True) if _ended_well(child, children) else (child, False)
    return None, False


def _ended_well(child: Child, children: Sequence[Child]) -> bool:
    """Whether ``child`` reported that all its processes succeeded
    (:meth:`Child.reported_success`) and every other of ``children`` exited 0."""
    others = all(c.poll() == 0 for c in children if c is not child)
    return others and child.reported_success()


def overdue_said(child: Child, line: str) -> str:
    """Why ``child`` is stopped, overdue (:meth:`Child.overdue`) after ``line`` reported its
    end: that line :func:`~launcher.shown.shown` (``repr()`` showed a quote in it in double
    quotes, and a character that does not print as Python writes it), and its last ones."""
    last = " | ".join(list(child.tail)[-3:])
    return (
        f"{child.spec.role} {child.spec.rank} did not exit {child_waits.WRAPUP_SECONDS:g} s "
        f"after it reported the job's end ({shown(line.strip())}); stopping it (SIGTERM, then "
        f"SIGKILL at the grace's end); its last lines: {last}"
    )
