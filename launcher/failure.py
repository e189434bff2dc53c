"""How a child of a launched job ended, for the report: :class:`Failure`, and the
:class:`TailReader` that reads what a child's last lines say that its status cannot."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from distconv.build_identity import build_id
from distconv.files import describe_os_error
from distconv.rank_endings import job_error_in
from distconv.refused_starts import start_refused_in

from . import divergence
from .failed_rank import failed_rank
from .named_cause import named_silent
from .own_stop import StopSaid, checkpointed_stop, ended_after_stop
from .said_cause import is_mismatch, job_error_text, last_words, words_cause
from .shown import shown
from .stopped_processes import StoppedProcess, stopped_headline, stopped_way_out

#: lines of a child's end the report shows
TAIL_LINES = 20
#: a worker's exit status when it stopped because another rank failed (``distconv train``:
#: :data:`distconv.sync.peers.PEER_FAILED_STATUS`): a victim, not the failure's cause
PEER_FAILED_STATUS = 75


def signal_name(number: int) -> str:
    """``SIGTERM`` for 15; a real-time signal, which :class:`signal.Signals` lacks, as
    ``SIGRTMIN+6`` (``kill -l`` names them so)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        low = getattr(signal, "SIGRTMIN", number + 1)
        return f"SIGRTMIN+{number - low}" if number >= low else f"signal {number}"


@dataclass(frozen=True)
class TailReader:
    """What a child's last lines say of its end that its status cannot (``ChildSpec.reader``):
    a cause for the report, and, for a child whose status merges its processes' (Hydra ORs its
    ranks'), the failing process's own status."""

    cause: Callable[[Sequence[str]], str | None]
    #: (the failing process's status in :meth:`Child.poll`'s terms, a cause naming the child's
    #: own) from the last lines and the child's status; None where they say nothing else
    ending: Callable[[Sequence[str], int], tuple[int, str | None] | None] = lambda _t, _c: None
    #: how many last lines it reads; the child keeps :data:`TAIL_LINES` at least (the report's)
    lines: int = TAIL_LINES
    #: whether a line reports that the child's work has ended (mpiexec's report of its ranks'
    #: end: :func:`launcher.mpi_exit.reports_end`), or None: from the first such line the
    #: child has :data:`launcher.child.WRAPUP_SECONDS` to exit, else it is stopped as failed
    ends: Callable[[str], bool] | None = None
    #: whether the last lines report that every process of the child succeeded (Hydra's
    #: all-zero statuses): a child stopped after such a report ended an attempt that succeeded
    succeeded: Callable[[Sequence[str]], bool] = lambda _t: False
    #: the cause as a process's own last words tell it, from the last lines, the status the
    #: report gives and the cause read so far (:func:`launcher.mpi_exit.said_by_rank`)
    said: Callable[[Sequence[str], int | None, str | None], str | None] = lambda _t, _s, c: c

    def read(self, tail: Sequence[str], code: int | None) -> tuple[int | None, str | None]:
        """The status the report gives (``code``, the child's own, or what :attr:`ending`
        reads) and its cause (what :attr:`said` makes of it)."""
        cause = self.cause(tail)
        if code is not None:
            code, cause = self.ending(tail, code) or (code, cause)
        return code, self.said(tail, code, cause)


@dataclass(frozen=True)
class Failure:
    """The first child that failed in an attempt (a victim only where no other failed: see
    :attr:`victims`). Where its last lines say that the ranks run different jobs
    (:func:`~distconv.rank_endings.different_jobs_in`), which stops every rank alike, that is
    its :attr:`cause`, and :meth:`describe` blames no rank, as where the update diverged
    (:mod:`launcher.divergence`); where they say that a rank could
    not set up (:func:`~distconv.rank_endings.setup_failure_in_lines`: the other ranks were
    told of it, and stop as its victims), that leads its cause (:func:`setup_failure_cause`);
    where a shard named this worker as keeping it waiting past its ``--timeout``
    (:attr:`straggler`), the shard's words are its cause (:mod:`launcher.named_cause`)."""

    role: str
    rank: int
    exit_code: int | None
    signal: str | None
    log: str
    tail: list[str]
    restart: int
    signal_number: int | None = None
    #: what the child's last lines say of its failure (:class:`TailReader`), or None
    cause: str | None = None
    #: the workers that stopped because another rank failed (:data:`PEER_FAILED_STATUS`),
    #: besides this one: ``{"role", "rank", "exit_code", "log"}`` each
    victims: list[dict] = field(default_factory=list)
    #: the other children of the attempt that failed on their own, not by the launcher's stop
    #: nor as victims (75): those that met the same error (a data directory missing on every
    #: worker) or stopped on this failure in words of their own (a shard's workers' ``pserver
    #: shard 0 ... is gone``): ``{"role", "rank", "exit_code", "signal", "log", "said"}`` each,
    #: ``said`` its last words (:func:`last_words`)
    failed_too: list[dict] = field(default_factory=list)
    #: a rank whose failure its victims named, still running at the settle's end, which the
    #: launcher's stop ended (:meth:`outstayed`): not its own status (not in ``failure.json``)
    stopped: bool = False
    #: blamed because a victim named it as the rank that could not set up, or that a shard
    #: named as silent (:meth:`outstayed`; not in ``failure.json``)
    named: bool = False
    #: the job's own error that another child of the attempt said, where every child that
    #: failed otherwise only stopped because of it (:func:`launcher.job_error.said_elsewhere`:
    #: ``(class, who)``); not in ``failure.json``
    job_error_elsewhere: tuple[str, str] | None = None
    #: why the launcher could not write the child's :attr:`log` (``no space left on device``),
    #: which lacks the lines from then on (:attr:`tail` has the last); None where it could
    log_error: str | None = None
    #: its process that the launcher's stop found stopped, before letting it run to its end
    #: (:mod:`launcher.stopped_processes`); None where none was. Not in ``failure.json``
    found_stopped: StoppedProcess | None = None
    #: what stopped each of the processes the stop found beside a wait given up, where it
    #: found several (:func:`~launcher.stopped_blame.as_found`: each named in :attr:`cause`,
    #: none blamed), for the headline's way out. Not in ``failure.json``
    stopped_beside: tuple[str, ...] = ()
    #: whether the job may train asynchronously (its shards' ``--mode async``, or a program's
    #: own shards: :func:`launcher.attempt_failure.may_train_async`), where another attempt
    #: may not meet a divergence again (:attr:`every_attempt`). Not in ``failure.json``
    asynchronous: bool = False

    def __post_init__(self) -> None:
        if self.cause is None and self.signal is not None and self.checkpointed is not None:
            object.__setattr__(self, "cause", ended_after_stop(self.signal))
            return
        said = words_cause(self.role, self.rank, self.tail, self.cause, self._exited_failed)
        object.__setattr__(self, "cause", said)

    def outstayed(self, stopped: bool) -> Failure:
        """This failure of a child that its victims named as the failure's cause (the rank that
        could not set up, a straggler; the shard they gave up on), still running at the settle's
        end: it, not a victim (75, "try again"), is blamed. Where
        the launcher's stop ended it (``stopped``): by its signal, its end says nothing (it
        hung after its failure: "did not exit"); by an exit 143 (a SIGTERM handler), that is
        the stop's status, not one of a signal to the launcher; either way the launcher exits
        1, as it does where it exits 0 or 75 (no victim's "try again": its victims named it)."""
        if stopped and self.signal is not None:
            return replace(
                self, exit_code=None, signal=None, signal_number=None, stopped=True, named=True
            )
        return replace(self, stopped=stopped, named=True)

    @property
    def status(self) -> int:
        """The launcher's exit status for this failure: the child's code (1 for a server's 0,
        for a named cause's 0 or 75, for a victim's 75 where another child said the job's
        own error, or one the stop ended), or 128 + signal."""
        if self.signal is not None:
            number = self.signal_number or getattr(signal, self.signal, None)
            return 128 + int(number) if number else 1
        if self.stopped:  # the launcher's stop ended it: its 143 no signal to the launcher
            return 1
        if (self.named or self.job_error_elsewhere or self.straggler) and (
            self.exit_code == PEER_FAILED_STATUS
        ):
            return 1  # the cause, or the job's own error: no "try again"
        return self.exit_code if self.exit_code and 0 < self.exit_code < 256 else 1

    @property
    def checkpointed(self) -> StopSaid | None:
        """What the stop line in :attr:`tail` says, where this child's end was a checkpointed
        stop, not a crash (:func:`~launcher.own_stop.checkpointed_stop`); None otherwise."""
        ended = -self.signal_number if self.signal_number else self.exit_code
        return checkpointed_stop(self.role, ended, self.tail)

    @property
    def failed_rank(self) -> int | None:
        """The rank of the job that failed, where known (:func:`~launcher.failed_rank.
        failed_rank`): a worker's own, the one mpiexec's cause names; else None. None too
        where every rank stops alike (:attr:`diverged`, :attr:`different_jobs`): the rank that
        exited first, another on each attempt, is no culprit, as :meth:`describe` says."""
        if self.diverged or self.different_jobs:
            return None
        return failed_rank(self.role, self.rank, self.cause)

    @property
    def straggler(self) -> bool:
        """Whether a shard named this worker alone as keeping it waiting past its ``--timeout``
        (its :attr:`cause`: :func:`~launcher.named_cause.named_silent`): stopped, stuck or slow."""
        return named_silent(self.role, self.rank, self.cause)

    @property
    def different_jobs(self) -> bool:
        """Whether the ranks run different jobs: every rank stops on it alike, and a restart
        of the same command would only stop on it again."""
        return self._exited_failed and is_mismatch(self.cause)

    @property
    def diverged(self) -> bool:
        """Whether the job's update diverged (a NaN or infinity: :mod:`launcher.divergence`),
        as this child's last words or its cause say: every rank stops on it alike."""
        return self._exited_failed and divergence.divergence_in([self.cause or ""]) is not None

    @property
    def _exited_failed(self) -> bool:  # of itself: no signal, a status other than 0
        return self.signal is None and bool(self.exit_code)

    @property
    def every_attempt(self) -> str | None:
        """What every attempt of the same command would stop on again, so that a restart is
        no use (``the ranks run different jobs, ...``); None where a restart may help. So too
        a start refused for good (:func:`~distconv.refused_starts.start_refused_in`, in the
        failing rank's last line or its cause, what its peers were told included): a resume of a
        checkpoint of another run, model or format version; an output directory that holds
        another run; a weights source that does not fit (``--init-from``, ``load_weights``); an
        optimizer the shards would not rebuild: no attempt changes them. Not an earlier line: a
        program that said a resume was refused and went on (afresh) failed of something else,
        which a restart may get past. So too an error of the job itself, its data, model or
        configuration (a ``DataError`` at fit start or at the step whose batch holds a bad
        label: :func:`~distconv.rank_endings.job_error_in`), in a rank's last line (under MPI
        each rank's) or in the cause; or in another child's last words, where every child that
        failed otherwise only stopped because of it (:attr:`job_error_elsewhere`: a victim, or a
        rank that the launcher's stop ended). So too an update that diverged (:attr:`diverged`),
        but in a job that trains asynchronously (:attr:`asynchronous`), whose next attempt
        computes other values."""
        if self.different_jobs:
            return "the ranks run different jobs, which every attempt would stop on"
        if (own := self.job_error) is not None:
            return job_error_text(own[0])
        if (refused := self._refused) is not None:
            return f"{refused}, which every attempt would refuse"
        if self.diverged and not self.asynchronous:
            return divergence.EVERY_ATTEMPT
        if (elsewhere := self.job_error_elsewhere) is not None:
            return job_error_text(*elsewhere)
        return None

    @property
    def job_error(self) -> tuple[str, str] | None:
        """The class and message of the job's own error that this child stopped on, as its
        last words (under MPI each rank's) or its cause say it
        (:func:`~distconv.rank_endings.job_error_in`); None where it ended by a signal or the
        launcher's stop, or exited 0."""
        if self.signal is not None or not self.exit_code:
            return None
        return job_error_in([*last_words(self.tail), self.cause or ""])

    @property
    def _refused(self) -> str | None:
        """Why every attempt would meet this failure again (a refusal of the command, its
        directory, its weights' source or its optimizer, read from the last line it wrote or
        its cause); None where a restart may get past it
        (:func:`~distconv.refused_starts.start_refused_in`)."""
        if self.signal is not None or not self.exit_code:
            return None
        return start_refused_in([*last_words(self.tail)[-1:], self.cause or ""])

    def describe(self) -> str:
        """The headline: who failed and how (:meth:`stopped_too` says who stopped with it)."""
        if self.different_jobs:
            return (  # every rank stops on it alike: none is blamed
                f"the ranks run different jobs, which stops every rank ({self.role} {self.rank} "
                f"exited first, with exit code {self.exit_code}): {self.cause}"
            )
        if self.diverged:  # every rank stops on it alike: none is blamed
            return (
                f"{self.cause}; every rank stops on it alike ({self.role} {self.rank} exited"
                f"{'' if self.role == 'mpiexec' else ' first'}, with exit code {self.exit_code})"
            )
        if (found := self.found_stopped) is not None:  # what its peers could only guess at
            said = stopped_headline(self.role, self.rank, found.pid, found.by)
            cause = f": {self.cause}" if self.cause else ""
            return f"{said}{cause}; {stopped_way_out(found.by)}"
        if self.named and self.role == "server":  # the workers gave up on it: it never exited
            said = (
                f"{self.role} {self.rank} gave its workers no answer and had not exited "
                "(stopped, hung or cut off; named by them)"
            )
        elif self.straggler and self.signal is None:  # its end (a stop's, its 1 or 75) says
            # less than the shard; a signal of its own (the OOM killer's SIGKILL) says more
            said = (
                f"{self.role} {self.rank} kept its shard waiting past --timeout (stopped, stuck or "
                "slower than that; named by the shard)"
            )
        elif self.stopped and self.exit_code is None:
            said = f"{self.role} {self.rank} failed and did not exit (stopped by the launcher)"
        elif self.stopped:
            said = (
                f"{self.role} {self.rank} failed, was stopped by the launcher after --settle and "
                f"exited with code {self.exit_code}"
            )
        elif self.named and self.exit_code in (0, PEER_FAILED_STATUS):  # the victim's lines
            said = (  # say its failure: neither a success nor another rank's failure
                f"{self.role} {self.rank} was named as the failure's cause but exited with code "
                f"{self.exit_code}"
            )
        elif self.exit_code == 0:  # only a server ends an attempt so (the workers need it)
            said = f"{self.role} {self.rank} exited (code 0) while workers were running"
        elif (stop := self.checkpointed) is not None:  # no crash: a stop
            said = stop.headline(self.role, self.rank, self.exit_code)
        elif self.signal is not None and self.role == "mpiexec" and self.failed_rank is not None:
            # a rank's signal, which mpiexec's status only passes on: the rank leads
            said = (
                f"rank {self.failed_rank} (under mpiexec {self.rank}) died of signal {self.signal}"
            )
        elif self.signal is not None:
            said = f"{self.role} {self.rank} failed with signal {self.signal}"
        else:
            said = f"{self.role} {self.rank} failed with exit code {self.exit_code}"
            if self._victim:  # no other child failed within the launcher's settle time
                said += (
                    " (stopped because another rank failed: its last lines name it; no other "
                    "child had failed yet)"
                )
        said = f"{said}: {self.cause}" if self.cause else said
        ways = [stopped_way_out(by) for by in dict.fromkeys(self.stopped_beside)]
        return "; ".join([said, *ways])

    def stopped_too(self) -> str:
        """``; worker 0 stopped because of it (exit code 75)``: the :attr:`victims`, if any;
        then ``; worker 1 failed too (exit code 1)``: the :attr:`failed_too`, if any."""
        said = ""
        if self.victims:
            names = ", ".join(f"{v['role']} {v['rank']}" for v in self.victims)
            why = "too" if self._victim else "because of it"
            said = f"; {names} stopped {why} (exit code {PEER_FAILED_STATUS})"
        for other in self.failed_too:
            how = other["signal"] or f"exit code {other['exit_code']}"
            said += f"; {other['role']} {other['rank']} failed too ({how})"
        return said

    @property
    def _victim(self) -> bool:  # a named cause's 75 is no victim's: its victims named it
        named = self.named or self.straggler
        return self.role == "worker" and self.exit_code == PEER_FAILED_STATUS and not named


def report_entry(failure: Failure, max_restarts: int, then: str | None) -> dict:
    """``failure``'s report as ``failure.json`` holds it (each line of ``restarts.jsonl`` too:
    :mod:`launcher.restarts`): its fields, ``failed_rank`` (:attr:`Failure.failed_rank`),
    ``max_restarts``, the ``time`` now, ``then``,
    what came after it (a signal, a restart, a restart that could not start), or None, and
    ``build``, the launcher's distconv (:func:`~distconv.build_identity.build_id`)."""
    entry = {**asdict(failure), "failed_rank": failure.failed_rank}
    entry |= {"max_restarts": max_restarts, "time": time.time()}
    entry["then"] = then
    entry["build"] = build_id()  # the launcher's, as its start line says: which code ran
    # fields docs/operations.md does not list: the headline says the first two (exit_code and
    # signal null: the launcher's stop ended it) and the last, ``then`` the third
    del entry["stopped"], entry["named"], entry["job_error_elsewhere"], entry["found_stopped"]
    del entry["stopped_beside"]  # named in the cause; the headline adds its way out
    del entry["asynchronous"]  # ``then`` says what it decided
    return entry


def write_report(
    path: Path, failure: Failure, max_restarts: int, then: str | None
) -> tuple[str, Path | None]:
    """``failure`` as ``failure.json`` at ``path`` (:func:`report_entry`), whole or not at all
    (written beside it, then renamed); ``then``: what came after it (a signal, a restart that
    could not start). Returns what the report's last line says: where it is, or why it was not
    written (a full disk: the report on stderr is all there is, not lost); and ``path`` where
    it was written, else None (what a notice of the report's message dropped names)."""
    entry = report_entry(failure, max_restarts, then)
    tmp = path.with_suffix(".json.tmp")
    try:
        tmp.write_text(json.dumps(entry, indent=2) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        with suppress(OSError):  # a folder in its place, a read-only disk: left then
            tmp.unlink(missing_ok=True)
        # the report is what is not written (a full disk): the temporary file is named only
        # where it stands in the way (a folder in its place), not where it is only left over
        # (an earlier launcher's, on a disk since made read-only: it cannot be removed)
        where = tmp if tmp.is_dir() else path
        return f"report not written: {shown(where)}: {describe_os_error(exc)}", None
    return f"report: {shown(path)}", path
