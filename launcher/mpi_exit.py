"""What ``mpiexec``'s exit status cannot say: that a rank died of a signal, and which.

A rank killed by a signal makes MPICH's Hydra exit with the signal's number (9 for SIGKILL)
and OpenMPI's ``mpirun`` with its own code, the same statuses as a rank's ``exit(9)``: the
report said "mpiexec 0 failed with exit code 9" either way. Both name the signal in their last
lines, Hydra without the rank (``YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed
(signal 9)``), OpenMPI with it (``mpirun noticed that process rank 1 with PID 4242 on node a
exited on signal 9 (Killed).``); :func:`signal_cause` reads them.

Hydra's line alone cannot be trusted: it shows the bitwise OR of every process's wait status,
and once a rank fails Hydra SIGKILLs the others, whose status (signal 9) it sometimes has
collected by then, so a rank's ``exit(9)`` (status ``9 << 8``) OR'd with a cleaned-up rank's
SIGKILL (``9``) reads ``Killed (signal 9)``, a rank's ``exit(3)`` so too, a rank's SIGABRT (6)
so ``Terminated (signal 15)``. ``launcher.mpi`` therefore asks Hydra for each process's own
status (``-print-all-exitcodes``: ``[mpiexec@a] Exit codes: [a] 9,2304``, a further line
``[b] 0,0`` for each further host), and where that line is there it alone is read: a signal
other than SIGKILL is a rank's own; a SIGKILL is one only where no rank exited non-zero of
itself (the cleanup follows a failure; it never comes first).

Hydra's exit status is that OR too, so a rank's ``exit(3)`` beside the cleanup's SIGKILL made
the launcher exit 9. Where the statuses are there, the launcher reports and exits with the
failing rank's own (:func:`rank_status`), and names mpiexec's in the cause
(:func:`mpiexec_reader`, the :class:`~launcher.failure.TailReader` the launcher gives mpiexec).

With more than one proxy (several hosts, or several names of this one) Hydra prints neither
the statuses nor the exit string when a rank dies of a signal: only its banner, ``=   PID 4242
RUNNING AT node-b`` / ``=   EXIT CODE: 9``, and mpiexec exits 255. Hydra prints that banner
only for a process that did not exit (a signal), with its wait status (the signal, plus 128
where it dumped core), at the first proxy whose statuses hold one, and cleans up after it: a
rank's exit or ``MPI_Abort`` prints none. The banner's signal is then the rank's own
(:func:`hydra_banner`), reported and exited with as the statuses' would be.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

from .failure import PEER_FAILED_STATUS, TailReader, signal_name
from .rank_reason import rank_reason

# matched from a line's first character: mpiexec's own lines are bare, while every line of a
# rank comes behind the rank MPI puts in front of it (``[1] ``, ``[1,1]<stdout>:``), so a rank
# that prints such a line (a log quoting an earlier run's banner) is not taken for mpiexec;
# OpenMPI's line begins with its program's name (mpirun, mpiexec, prterun, mpirun.openmpi);
# older Hydras (MPICH2's, an older Intel MPI's) print Hydra's without its "YOUR "
_HYDRA = re.compile(r"(?:YOUR )?APPLICATION TERMINATED WITH THE EXIT STRING: .*\(signal (\d+)\)")
_OPENMPI = re.compile(
    r"[\w.-]+ noticed that process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)"
)
#: the first line of Open MPI's sentence: Open MPI 4 prints it on one line, Open MPI 5 wraps it
#: (its help texts are wrapped before the values go in: ``prterun noticed that process rank 2
#: with PID 4242 on node a exited on`` / ``signal 9 (Killed).``)
_OPENMPI_HEAD = re.compile(r"[\w.-]+ noticed that process rank \d+ with PID ")
#: the lines Open MPI's sentence may span
_OPENMPI_LINES = 3

#: mpiexec's last lines read for Hydra's statuses: a line per host, so a job of hundreds of hosts
#: keeps its whole block (the report shows the last few)
READ_LINES = 1024
#: Hydra's ``-print-all-exitcodes``, a bare line as its other own lines ("[mpiexec@host] ");
#: a rank's line comes behind its tag
_HYDRA_CODES = re.compile(r"\[mpiexec@[^\]]*\] Exit codes: (.*)")
#: one host's statuses, on the line above or on a line of their own after it (a host's name,
#: never a rank's tag: ``[1] 0,0`` is a rank's line)
_HOST_CODES = re.compile(r"\[(?!\d+\])[^\]]*\] (\d+(?:,\d+)*)")
#: Hydra's banner at a rank's failure (a bare line, as its other own lines), and its lines that
#: name the process (``=   PID 4242 RUNNING AT node-b``; an older Hydra prints none) and its status
_HYDRA_BANNER = re.compile(r"=\s+BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES")
_BANNER_AT = re.compile(r"=\s+PID (\d+) RUNNING AT (\S+)")
_BANNER_CODE = re.compile(r"=\s+EXIT CODE: (\d+)")
#: the banner's lines after its first read for those two
_BANNER_LINES = 3


def signal_cause(tail: Sequence[str], ranks: int | None = None) -> str | None:
    """``rank 1 died of signal 9 (SIGKILL), as mpiexec says`` from the last lines of
    ``mpiexec``'s output (``a rank`` where MPI names none); None where they name no signal.
    Hydra's statuses of every process, where the lines hold them, say it alone (see above);
    where only their end is there (the first line cut off), nothing does: the banner below
    them is their OR. They name the rank where they are one host's, ``ranks`` of them (the
    job's, where known): a host's statuses are in rank order, so the job's all on one host
    are; across hosts they are not (:func:`one_host_rank`). Without them or Hydra's exit
    string (several proxies), Hydra's banner names the signal and the rank's host
    (:func:`hydra_banner`: ``a rank on node-b (PID 4242) died of signal 9 ...``)."""
    statuses = hydra_statuses(tail)
    if statuses is not None:
        found = rank_signal(statuses)
        if found is None:
            return None
        rank = one_host_rank(tail, found[0], ranks)
        return _said("a rank" if rank is None else f"rank {rank}", found[1])
    if any(_HOST_CODES.fullmatch(line) for line in tail):
        return None
    for at in range(len(tail) - 1, -1, -1):
        found = _noticed(tail, at)
        if found is not None:
            return _said(f"rank {found[0]}", found[1])
        found = _HYDRA.match(tail[at])
        if found is not None:
            return _said("a rank", int(found[1]))
    banner = hydra_banner(tail)  # several proxies: Hydra's banner alone names the signal
    if banner is not None and os.WIFSIGNALED(banner[1]):
        return _said(banner[0], os.WTERMSIG(banner[1]))
    return None


def _noticed(tail: Sequence[str], at: int) -> tuple[int, int] | None:
    """The rank and the signal of Open MPI's ``noticed`` sentence where it begins at
    ``tail[at]`` (joined with the lines after, where Open MPI 5 wrapped it); else None."""
    if _OPENMPI_HEAD.match(tail[at]) is None:
        return None
    found = _OPENMPI.match(" ".join(line.strip() for line in tail[at : at + _OPENMPI_LINES]))
    return None if found is None else (int(found[1]), int(found[2]))


def _said(who: str, number: int) -> str:
    return f"{who} died of signal {number} ({signal_name(number)}), as mpiexec says"


def _itself(code: int) -> str:
    """mpiexec's own status ``code`` (in :meth:`launcher.child.Child.poll`'s terms), for a cause
    that reports a rank's in its place."""
    ended = f"exited with code {code}" if code >= 0 else f"died of signal {signal_name(-code)}"
    return f"mpiexec itself {ended}"


def hydra_banner(tail: Sequence[str]) -> tuple[str, int] | None:
    """Who Hydra's first banner in ``tail`` names and its ``EXIT CODE``: ``("a rank on node-b
    (PID 4242)", 9)`` (``"a rank"`` from an older Hydra, whose banner names no process); None
    where there is none. Hydra prints one only for a process that did not exit, with its wait
    status: a signal (:func:`os.WTERMSIG`), 128 added where it dumped core (139: SIGSEGV). The
    first is the failing rank's: Hydra's cleanup comes after it. None too where a host's
    status line is there (the block's first line cut off): statuses, not the banner, say it."""
    if any(_HOST_CODES.fullmatch(line) for line in tail):
        return None
    for at, line in enumerate(tail):
        if _HYDRA_BANNER.match(line) is None:
            continue
        where = code = None
        for after in tail[at + 1 : at + 1 + _BANNER_LINES]:
            where = where or _BANNER_AT.match(after)
            code = code or _BANNER_CODE.match(after)
        if code is None:  # cut off
            return None
        who = "a rank" if where is None else f"a rank on {where[2]} (PID {where[1]})"
        return who, int(code[1])
    return None


def hydra_statuses(tail: Sequence[str]) -> list[int] | None:
    """Every process's wait status from Hydra's last ``Exit codes:`` line and the hosts' lines
    after it; None where the lines hold none (another MPI, or cut off from the tail)."""
    hosts = hydra_hosts(tail)
    statuses = [status for host in hosts or () for status in host]
    return statuses or None


def hydra_hosts(tail: Sequence[str]) -> list[list[int]] | None:
    """:func:`hydra_statuses` host by host, each host's by rank; None where there are none."""
    for start in range(len(tail) - 1, -1, -1):
        found = _HYDRA_CODES.match(tail[start])
        if found is None:
            continue
        hosts = []
        for line in [found[1], *tail[start + 1 :]]:
            codes = _HOST_CODES.fullmatch(line)
            if codes is None:
                break
            hosts.append([int(code) for code in codes[1].split(",")])
        return hosts or None
    return None


def one_host_rank(tail: Sequence[str], index: int | None, ranks: int | None) -> int | None:
    """The rank of the process at ``index`` of Hydra's statuses in ``tail``, where they are
    one host's, ``ranks`` of them: the job's every rank ran on that host, whose statuses are
    in rank order. None where ``index`` or ``ranks`` is, or the statuses span hosts (ranks
    are placed on hosts by their slots, which the statuses do not show) or are fewer (a
    block cut short)."""
    hosts = hydra_hosts(tail)
    if index is None or ranks is None or hosts is None or len(hosts) != 1:
        return None
    return index if len(hosts[0]) == ranks else None


def rank_signal(statuses: Sequence[int]) -> tuple[int | None, int] | None:
    """Where a rank died of a signal, the index of its status in ``statuses`` (every
    process's) and the signal: the first signal other than SIGKILL, else SIGKILL where no
    process exited non-zero of itself (Hydra SIGKILLs the others after a rank's failure, so
    beside such an exit it is Hydra's); else None. The index is None where another process
    died of such a signal too: which of them came first, the statuses do not say."""
    signals = [(i, os.WTERMSIG(s)) for i, s in enumerate(statuses) if os.WIFSIGNALED(s)]
    own = [(i, number) for i, number in signals if number != signal.SIGKILL]
    exited = any(os.WIFEXITED(s) and os.WEXITSTATUS(s) != 0 for s in statuses)
    found = own or (signals if signals and not exited else [])
    if not found:
        return None
    return (found[0][0] if len(found) == 1 else None), found[0][1]


def rank_signal_number(statuses: Sequence[int]) -> int | None:
    """The signal a rank died of, from every process's wait status (:func:`rank_signal`)."""
    found = rank_signal(statuses)
    return None if found is None else found[1]


def rank_status(statuses: Sequence[int]) -> int | None:
    """The failing rank's own status from every process's wait status, in
    :meth:`launcher.child.Child.poll`'s terms: the first exit code (in Hydra's order: host by
    host, each host's by rank; it gives no times) that is neither 0 nor
    :data:`~launcher.failure.PEER_FAILED_STATUS`, else minus the signal
    :func:`rank_signal_number` names, else that 75; None where all are zero.

    A rank's 75 says another rank failed (a parameter-server worker's ``PeerFailed``): it is
    reported only where no other rank says more, as the local launcher's settle rule does."""
    exits = [os.WEXITSTATUS(s) for s in statuses if os.WIFEXITED(s) and os.WEXITSTATUS(s)]
    causes = [code for code in exits if code != PEER_FAILED_STATUS]
    if causes:
        return causes[0]
    number = rank_signal_number(statuses)
    if number is not None:
        return -number
    return exits[0] if exits else None


def rank_ending(
    tail: Sequence[str], code: int, ranks: int | None = None
) -> tuple[int, str | None] | None:
    """The failing rank's own status (:func:`rank_status`) and the cause, naming mpiexec's own
    status ``code``, from Hydra's status lines in ``tail`` (Open MPI's line where mpirun was
    stopped after it: :func:`_noticed_before_stop`; Hydra's banner where it printed no
    statuses: :func:`_banner_ending`); None where they are not there, say
    nothing (all zero), or agree with ``code`` in a status other than a 75 (whose cause says
    what a 75 is): then mpiexec's status is reported as it is. ``ranks``: the job's number of
    ranks, where known (:func:`signal_cause`)."""
    statuses = hydra_statuses(tail)
    if statuses is None:
        return _noticed_before_stop(tail, code) or _banner_ending(tail, code)
    own = rank_status(statuses)
    if own is None or (own == code and own != PEER_FAILED_STATUS):
        return None
    if own == PEER_FAILED_STATUS:  # no rank said more: say what a 75 is, even as mpiexec's own
        said = _victim_said(statuses)
    else:
        said = [f"a rank exited with code {own}"] if own > 0 else []
        signalled = signal_cause(tail, ranks)  # a rank's own signal beside an exit too
        said += [signalled] if signalled else []
    return own, "; ".join([*said, _itself(code)])


def _noticed_before_stop(tail: Sequence[str], code: int) -> tuple[int, str] | None:
    """Open MPI's rank's signal (its ``noticed`` line) and the cause, where ``mpirun`` itself
    then died of SIGTERM or SIGKILL: the launcher's stop of an mpirun that stayed after that
    line (:func:`reports_end`), whose own signal says nothing of the rank's; else None."""
    if code not in (-signal.SIGTERM, -signal.SIGKILL):
        return None
    for at in range(len(tail) - 1, -1, -1):
        found = _noticed(tail, at)
        if found is not None:
            said = _said(f"rank {found[0]}", found[1])
            return -found[1], f"{said}; mpiexec itself died of signal {signal_name(-code)}"
    return None


def _banner_ending(tail: Sequence[str], code: int) -> tuple[int, str] | None:
    """Where Hydra printed its banner but no statuses (several proxies: :func:`hydra_banner`),
    the rank's signal there as the status, minus it, and the cause naming mpiexec's own
    ``code`` (255: Hydra's proxies' errors at the cleanup); a banner's code that is no signal
    is named in the cause, mpiexec's status kept. None without a banner, or where mpiexec
    itself ended as the banner says (the cause then names the signal alone)."""
    banner = hydra_banner(tail)
    if banner is None:
        return None
    who, status = banner
    if not os.WIFSIGNALED(status):
        return code, f"{who} ended with Hydra's EXIT CODE {status}; {_itself(code)}"
    number = os.WTERMSIG(status)
    if code == -number:
        return None
    return -number, f"{_said(who, number)}; {_itself(code)}"


def _victim_said(statuses: Sequence[int]) -> list[str]:
    """What a reported :data:`~launcher.failure.PEER_FAILED_STATUS` is, as ``local`` says it,
    and a SIGKILL beside it: the rank that failed (stuck, or killed by the OOM killer before
    the others' 75), or Hydra's cleanup after the 75; its statuses have no times to tell."""
    said = [
        f"a rank exited with code {PEER_FAILED_STATUS} (stopped because another rank failed: "
        "the ranks' lines name it)"
    ]
    if any(os.WIFSIGNALED(s) and os.WTERMSIG(s) == signal.SIGKILL for s in statuses):
        said.append("a rank died of signal 9 (SIGKILL): the one that failed, or Hydra's cleanup")
    return said


def reports_end(line: str) -> bool:
    """Whether ``line`` is mpiexec's own report that its ranks have ended: Hydra's banner at a
    rank's failure or its ``Exit codes:`` line (at any end), Open MPI's ``noticed`` line; a
    rank's line (behind its tag) never is. mpiexec exits right after such a line, so the
    launcher stops one that stays (``TailReader.ends``: :data:`launcher.child.WRAPUP_SECONDS`)."""
    return any(p.match(line) is not None for p in (_HYDRA_BANNER, _HYDRA_CODES, _OPENMPI_HEAD))


def reports_success(tail: Sequence[str], ranks: int | None) -> bool:
    """Whether Hydra's statuses in ``tail`` say that every rank exited 0: an mpiexec stopped
    after it printed them (:func:`reports_end`) ended a job that succeeded. ``ranks``: the
    job's number of ranks, each of which must have its status there: a Hydra stopped while
    its block of a line per host was still coming (or the block cut off) has said nothing of
    the other hosts' ranks, which may have failed. None (the count unknown): never a success,
    as a block cut short cannot be told from a whole one."""
    statuses = hydra_statuses(tail)
    if statuses is None or ranks is None or len(statuses) != ranks:
        return False
    return not any(statuses)


def said_by_rank(
    tail: Sequence[str], status: int | None, cause: str | None, ranks: int | None = None
) -> str | None:
    """``cause`` led by the line by which a rank said why it ends the job
    (:func:`~launcher.rank_reason.rank_reason`), where ``tail`` has one: ``rank 1 ended the
    job: SyncError: ...`` (its ``MPI_Abort``, whose status says nothing), or, where the status
    ``status`` is SIGKILL, ``rank 1 ended itself (SIGKILL) after: ...`` in place of mpiexec's
    word of that signal (its last resort, or the watchdog's end of its own rank). ``ranks``:
    as :func:`signal_cause`'s, which made ``cause``."""
    said = rank_reason(tail)
    if said is None:
        return cause
    rank, why = said
    if status != -signal.SIGKILL:
        return f"rank {rank} ended the job: {why}" + (f"; {cause}" if cause else "")
    lead = f"rank {rank} ended itself (SIGKILL) after: {why}"
    signalled = signal_cause(tail, ranks)
    if cause is None or signalled is None or signalled not in cause:
        return lead + (f"; {cause}" if cause else "")
    return cause.replace(signalled, lead)


def is_status_line(line: str) -> bool:
    """Whether ``line`` is Hydra's ``Exit codes:`` line or a further host's statuses: kept out
    of the launcher's output (a job that succeeds ends with ``... Exit codes: [a] 0,0``), read
    from the log's tail by :func:`hydra_statuses`."""
    return _HYDRA_CODES.match(line) is not None or _HOST_CODES.fullmatch(line) is not None


#: what the launcher reads from mpiexec's last lines (its ChildSpec.reader): the signal a rank
#: died of (:func:`signal_cause`) and the failing rank's own status (:func:`rank_ending`), from
#: up to :data:`READ_LINES` (Hydra prints a status line per host); and the line after which
#: mpiexec must exit soon (:func:`reports_end`), and the line by which a rank said why it ended
#: the job (:func:`said_by_rank`). It knows no job's number of ranks, so no report is a success
#: to it: the launcher gives mpiexec :func:`mpiexec_reader`'s, which counts them.
mpiexec_tail = TailReader(
    cause=signal_cause,
    ending=rank_ending,
    lines=READ_LINES,
    ends=reports_end,
    succeeded=partial(reports_success, ranks=None),
    said=said_by_rank,
)


def mpiexec_reader(ranks: int) -> TailReader:
    """:data:`mpiexec_tail` for a job of ``ranks`` ranks: its report of success must hold a
    status for each of them (:func:`reports_success`), and a rank's signal names the rank
    where Hydra's statuses are all of them on one host (:func:`signal_cause`): a rank killed
    on this host read "a rank died of signal 9", which rank not said."""
    return replace(
        mpiexec_tail,
        cause=partial(signal_cause, ranks=ranks),
        ending=partial(rank_ending, ranks=ranks),
        succeeded=partial(reports_success, ranks=ranks),
        said=partial(said_by_rank, ranks=ranks),
    )
