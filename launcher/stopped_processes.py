"""The processes of a gang that its stop found stopped (SIGSTOP, or held by a debugger), as
``/proc/PID/stat`` says, read before the stop's SIGCONT lets them run
(:func:`launcher.gang.send_stop_signals`), for the failure report.

A stopped process never exits nor answers: its peers give up on it (a shard names a stopped
worker; the workers name a stopped shard, or, where a program of one's own waits less than the
shards, the shard that a stopped worker held up). Once the stop's SIGCONT has let it run to its
SIGTERM, nothing says that it had been stopped; so the stop notes it first
(:class:`StopFindings`), and the report says it (:func:`stopped_headline`) and blames it
(:mod:`launcher.stopped_blame`).

The attempt's stop returns its findings (:func:`launcher.gang_stop.stop_gang`), and the
attempt's failure is decided with them (:func:`launcher.attempt_failure.attempt_failure`): the
restart line, ``restarts.jsonl``, ``failure.json``, the headline and the launcher's exit status
all blame the same child.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from distconv.procfs import stat_fields

if TYPE_CHECKING:
    from .child import Child

#: ``/proc/PID/stat``'s states of a stopped process, and what stopped it: a signal (SIGSTOP, or
#: SIGTSTP, SIGTTIN, SIGTTOU, which stop alike), or a debugger that traces it
STOPPED_BY = {"T": "SIGSTOP", "t": "a debugger"}


@dataclass(frozen=True)
class StoppedProcess:
    """A process of a child's group found stopped: its pid, and what stopped it
    (:data:`STOPPED_BY`'s words)."""

    pid: int
    by: str


def stopped_in_groups(groups: set[int]) -> dict[int, StoppedProcess]:
    """The stopped process of each of ``groups`` (process group ids) that has one, by group
    (the lowest pid, where several are: the leader, or the first its wrapper started); one
    look at ``/proc``, empty without it, and none without ``groups``: a stop of children all
    ended, as every worker is at a job's success, reads nothing."""
    if not groups:
        return {}
    try:
        entries = sorted(int(e) for e in os.listdir("/proc") if e.isdigit())
    except OSError:
        return {}
    found: dict[int, StoppedProcess] = {}
    for pid in entries:
        try:
            fields = stat_fields(pid)
        except OSError:  # unreadable now: says nothing of its state
            continue
        if fields is None or len(fields) < 3 or fields[0] not in STOPPED_BY:
            continue
        group = int(fields[2])
        if group in groups and group not in found:
            found[group] = StoppedProcess(pid, STOPPED_BY[fields[0]])
    return found


@dataclass
class StopFindings:
    """What one attempt's stop found: its children (``gang``) and the stopped process of each
    child still running that had one, as each child's stop signals were about to go; nothing
    without ``looks`` (a stop with no failure to report: a job's success, a stop signal's)."""

    gang: list[Child]
    stopped: list[tuple[Child, StoppedProcess]] = field(default_factory=list)
    looks: bool = True

    def look(self, children: list[Child]) -> None:
        """Note the stopped process of each of ``children`` still running (one look at
        ``/proc``). One that ended by itself is reported by its own end (its exit code, its
        signal), whatever process of its group (a helper it started) is stopped: it was not.
        None without :attr:`looks`: the shards, still running at a job's success, read none."""
        if not self.looks:
            return
        running = [c for c in children if c.poll() is None]
        found = stopped_in_groups({c.group.leader for c in running})
        self.stopped += [(c, found[c.group.leader]) for c in running if c.group.leader in found]

    def of(self, log: str) -> StoppedProcess | None:
        """The stopped process of the child whose log is ``log``; None where it had none."""
        return next((p for c, p in self.stopped if str(c.log_path) == log), None)


def stopped_headline(role: str, rank: int, pid: int, by: str) -> str:
    """``server 1's process (pid 7) was stopped (SIGSTOP), not crashed``: the headline of a
    child (``role`` ``rank``) whose process ``pid`` the stop found stopped by ``by``."""
    how = f"({by})" if by == STOPPED_BY["T"] else f"by {by}"
    return f"{role} {rank}'s process (pid {pid}) was stopped {how}, not crashed"


def stopped_way_out(by: str) -> str:
    """What to do of a process stopped by ``by`` (the launcher's stop has ended this one):
    let such a process go on in time, or find what stops it; one held by a debugger on purpose,
    give its peers the time to wait for it."""
    if by != STOPPED_BY["T"]:
        return (
            "a process a debugger holds, holds the whole job up till its peers give up on it: "
            "detach it in time, or raise --timeout while you debug (distconv train's, which its "
            "shards take too; a program of your own raises its sync's timeout=, but the shards "
            "the launcher starts for it keep their 60 s: detach within that)"
        )
    return (
        "a stopped process holds the whole job up till its peers give up on it: let it go on "
        "in time (kill -CONT PID), or find what stopped it (a kill -STOP, a Ctrl-Z)"
    )
