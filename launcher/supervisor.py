"""Run a gang of child processes as one job: prefixed output, gang kill, restarts, signals.

The rules (issue 11, "Gang semantics"):

- Every child runs in its own session, hence its own process group, and is always stopped by
  signalling the whole group, so nothing it started outlives the job (short of a process that
  leaves the group: below).
- A child that fails (non-zero exit or a signal, or a server that exits while workers run, where
  an exit 0 is one only if the workers do not then all exit 0: a drained shard's,
  :mod:`launcher.drained_shard`) ends the attempt: the others are stopped (below). The job is
  started again, up to ``max_restarts`` times (each failure a restart follows a line of
  ``<run_dir>/restarts.jsonl``: :mod:`launcher.restarts`); then the launcher exits non-zero with
  a report naming the first failing role and rank, its exit code or signal and the tail of its
  log, on stderr and as JSON in ``<run_dir>/failure.json``.
- The attempt succeeds when every worker has exited 0; servers still running then are stopped.
- SIGTERM, SIGINT or SIGHUP to the launcher stops the children (a SIGINT or SIGHUP the
  launcher was started ignoring, as under ``nohup`` or in a shell's background job, stays
  ignored; SIGTERM always stops the job); the launcher exits 128 + the first signal (143, 130
  or 129), with the failure report too where a child had failed first.
- Stopping: the workers' groups get SIGTERM (distconv checkpoints on it) while the servers
  keep serving (a parameter-server worker checkpoints through them); once no process is left
  in any worker's group, the servers get their stop signals (a shard: SIGTERM, then SIGINT,
  which ends its drain at once), each group's followed by SIGCONT for a stopped process. At
  ``grace`` seconds after the first SIGTERM, or at a second signal to the launcher that asks to
  stop now (a person's second Ctrl-C, or any more than a second after the first; one sooner
  repeats the first stop, as ``timeout`` delivers it: :mod:`launcher.second_signal`), whatever
  is left is killed; such a signal also cuts short the end's bounded waits on a slow output
  (not the pipes' drain into the logs: the record). A group counts until its last process is
  gone, not only its leader: a wrapper script that exits at once leaves the trainer its grace.
  On Linux each child also asks the kernel for SIGTERM when the launcher dies
  (``PR_SET_PDEATHSIG``), so even a SIGKILLed launcher takes its children with it. A process
  that left its group (``setsid``: mpiexec's ``ssh`` to another host) and is found among
  mpiexec's descendants at a stop signal, while it runs, is killed with the group at the
  stop's end (:mod:`launcher.strays`); a worker's or shard's, or one that left it otherwise, is
  out of reach: holding a child's output, it is said, and that output not waited for.
- The failure reported is the one that happened first: each child's exit time is taken by a
  thread waiting on it, so two children failing within one poll are told apart. A worker that
  exited 75 stopped because another rank failed (``distconv train``'s PeerFailed: the shard
  failed its step naming that rank), and often exits before the rank that failed has done
  printing its traceback: when the first failure is such a victim, the launcher waits up to
  ``settle`` seconds (:data:`SETTLE_SECONDS`) after its exit, sending no signal yet, for a
  child that failed otherwise, and reports that one (its status, its log's tail), naming the
  victims; if none comes, the worker the victim names as the rank that could not set up,
  where it still runs or exited 0 or 75 (where the stop ends it: "did not exit", exit 1),
  else the victim.
- Each line of output is written whole, behind its child's prefix, through one bounded queue
  (:mod:`launcher.terminal`: a stalled stdout drops lines, counted, and never stalls the job);
  the child's own log in ``<run_dir>/logs/`` gets the same lines without the prefix, all. With
  ``lines`` (``distconv train --log-format json``) every line, the launcher's own messages
  too, is a JSON object instead (:mod:`launcher.json_lines`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import BinaryIO

from distconv.launch_env import ENV_LOG_FILE

from . import child as child_waits  # its waits, as set when used (tests cut them)
from .arrivals import Arrivals, deaf
from .attempt_failure import attempt_failure
from .child import Child, ChildSpec
from .commands import LaunchError
from .drained_shard import workers_finish
from .failure import Failure, signal_name
from .gang import first_failed
from .gang_stop import say_repeat, stop_gang
from .held_logs import drain_held
from .interrupt import STOP_SIGNALS
from .json_lines import JsonLines
from .launch_lock import hold_run_dir
from .messages import Messages
from .own_stop import stopped_together
from .report import report_failure
from .restarts import RestartRecord
from .run_dir import clear_run_dir
from .settle import settle
from .stdout import binary_stream
from .stopped_processes import StopFindings
from .terminal import Terminal
from .wrapup import first_overdue, reported_before

__all__ = ["SETTLE_SECONDS", "STOP_SIGNALS", "ChildSpec", "Failure", "Supervisor"]

#: seconds a victim's failure (a worker's exit 75) waits for the failure that caused it
SETTLE_SECONDS = 2.0


class Supervisor:
    """Runs a job's children as a gang, with restarts and a failure report.

    Args:
        run_dir: where ``logs/<role>-<rank>.log``, ``failure.json``, ``restarts.jsonl`` go.
        grace: seconds between SIGTERM and SIGKILL when stopping children.
        out: where prefixed child lines go (default: the launcher's stdout).
        err: where the launcher's own messages and the failure report go (default stderr).
        poll: seconds between looks at the children.
        settle: seconds a first failure that is a victim (exit 75) waits for its cause.
        lines: writes every line as a JSON object (children's and the launcher's); None:
            children's lines behind their prefix, messages behind ``distconv-launch:``.
        job_id: the job's, named by the line a job that restarts saved ends with (None: "the job").
        run_named: the command names its run directory itself (``--job-id`` or ``--run-dir``:
            :func:`~launcher.go_on.names_its_run`): the way on after a checkpointed stop is then
            "the same command", with no ``--job-id`` to add.
        train: the ``distconv train`` arguments the workers run (None: a program of the
            user's), whose ``--overwrite`` that way on replaces with ``--resume auto``.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike,
        grace: float = 30.0,
        out: BinaryIO | None = None,
        err: BinaryIO | None = None,
        poll: float = 0.05,
        settle: float = SETTLE_SECONDS,
        lines: JsonLines | None = None,
        job_id: str | None = None,
        run_named: bool = False,
        train: Sequence[str] | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.grace = grace
        self.out = out if out is not None else binary_stream(sys.stdout)
        self.err = err if err is not None else binary_stream(sys.stderr)
        self.poll_interval = poll
        self.settle = settle
        self.lines = lines
        self.job_id = job_id
        self.run_named = run_named
        self.train = None if train is None else tuple(train)  # the way on's --overwrite
        self._lock = threading.Lock()  # the children's lines on ``out``
        # the launcher's messages: through the children's queue where ``err`` is ``out``'s file
        self.messages = Messages(self.err, lines)
        self._arrivals = Arrivals()  # the stop signals, in the order they came
        self._finished = False  # the attempt's workers all exited 0 before any signal
        self._outstayed: list[Child] | None = None  # whom a settle's victim may name
        self._stopped: list[Child] = []  # the children running as the attempt's stop began
        self._claim: int | None = None  # the run directory's lock (LAUNCH_LOCK), while held
        self._terminal: Terminal | None = None  # the lines' queue to ``out`` (never stalls)
        self._pumping: list[Child] = []  # output held their pumps past the attempt (_drain_logs)

    def say(
        self,
        message: str,
        level: str = "info",
        report: Path | None = None,
        paths: Mapping[str, str | os.PathLike[str]] | None = None,
    ) -> None:
        """One launcher message (:meth:`Messages.say`), never inside a child's line, never
        blocking for good; a JSON object of ``level`` under :attr:`lines`; ``report``: the
        file holding the failure report it says; ``paths``: the others it names, each a key
        of its own in that object (:data:`launcher.json_lines.PATH_FIELDS`)."""
        self.messages.say(message, level, report, paths=paths)

    def run(self, build: Callable[[int], list[ChildSpec]], max_restarts: int = 0) -> int:
        """Run the job until it succeeds, runs out of restarts, or the launcher is signalled.
        Each failure a restart follows is a line of ``<run_dir>/restarts.jsonl``
        (:class:`RestartRecord`), which a job that succeeds after restarts ends naming.

        Args:
            build: the children of attempt ``restart`` (0 first), called once per attempt so
                each attempt can have its restart count (``DISTCONV_RESTART``; its arguments
                stay as given, and a local job's shards serve on the same reserved ports in
                every attempt).
            max_restarts: how many times a failed job is started again.

        Returns:
            The launcher's exit status: 0, the failing child's status, or 128 + signal.
        """
        self.claim()
        previous: dict[int, object] = {}
        try:  # a run directory refused here is let go as well
            clear_run_dir(self.run_dir)  # logs/, no failure.json, restarts.jsonl of a run before
            record = RestartRecord(self.run_dir, self.say)
            previous = self._arrivals.catch()
            failed = partial(self.say, level="error")  # a full disk: said at once, on stderr
            notice = partial(self.messages.line, level="warning")
            self._terminal = Terminal(self.out, notice, failed=failed)
            drain = child_waits.OUTPUT_DRAIN_SECONDS
            self.messages.share(self._terminal, self.out, drain)  # 2>&1: in order with lines
            for restart in range(max_restarts + 1):
                self.messages.restart = restart
                try:
                    failure = self._attempt(build(restart), restart)
                except LaunchError as exc:  # a restart that cannot start (its log, its program)
                    stop = self._signals[0] if self._signals else None  # read once, for both
                    if restart == 0 and stop is not None:  # the status as any stop's
                        self.say(f"{exc}; stopped by {signal_name(stop)}", level="error")
                        return 128 + stop
                    if restart == 0:  # nothing failed before: the error alone says it
                        raise
                    then = f"restart {restart} of {max_restarts} could not start: {exc}"
                    if stop is not None:  # meanwhile: still the launcher's status, as any stop's
                        then += f"; stopped by {signal_name(stop)}"
                    self._report(failure, max_restarts, then=then)  # what the job died of
                    return failure.status if stop is None else 128 + stop
                if self._signals and self._finished:  # came while the servers were stopping
                    self.say(f"got {signal_name(self._signals[0])} after the job had finished")
                    record.finish(self.job_id)
                    return 0
                if self._signals:  # also when it came while a failed attempt was stopping
                    say_repeat(self._arrivals, self.say)  # one that came after the stop's end
                    stopped = f"stopped by {signal_name(self._signals[0])}"
                    if failure is not None:  # that failure is still the cause to report
                        self._report(failure, max_restarts, then=stopped)
                    self.say(stopped)
                    return 128 + self._signals[0]
                if failure is None:
                    record.finish(self.job_id)  # where restarts saved it: what they recovered from
                    return 0
                if restart < max_restarts and (alike := failure.every_attempt) is not None:
                    # the same command would only stop on it again: why, in failure.json too
                    unused = f"not restarting (--max-restarts {max_restarts}): {alike}"
                    self._report(failure, max_restarts, then=unused)
                    return failure.status
                if restart < max_restarts:
                    then = f"restarting the job ({restart + 1} of {max_restarts})"
                    self.say(f"{failure.describe()}{failure.stopped_too()}; {then}")
                    record.add(failure, max_restarts, then)  # before the restart starts
            self._report(failure, max_restarts)
            return failure.status
        finally:
            try:
                self._end_output()
            finally:  # given back whatever the end raised: release() gives back only its own
                self._arrivals.give_back(previous)  # its own only
                self.unclaim()

    def _end_output(self) -> None:
        """The end of :meth:`run`'s output: the view's last lines (a stalled output has its
        bound), the held pipes drained into the logs, what the output lacks, its last words."""
        if self._terminal is not None:
            terminal, self._terminal = self._terminal, None
            drain, stop = child_waits.OUTPUT_DRAIN_SECONDS, self._stop_now
            unshown = terminal.close(drain, bool(self._signals), stop)
            terminal.shut()  # the pumps it holds up: into the logs alone, then they end
            self._drain_logs()
            for said in (unshown, terminal.late()):  # queued still where shared: a stall
                if said:  # goes on; the lines that came after the output ended: counted
                    self.say(said, level="warning")
        # cut by a second signal too: a slow reader of their own stderr (the report's pieces
        # taken one a second) held the launcher up to the whole wait after it
        self.messages.end(child_waits.OUTPUT_DRAIN_SECONDS, self._stop_now)

    def claim(self) -> None:
        """Hold the run directory for this launch (``launch.lock``, until :meth:`run` returns or
        the launcher dies), before anything is written there: a second launch into it while
        the first runs mixed its children's lines into the first's logs, deleted its
        ``failure.json`` or left its own there beside a job that succeeded. Idempotent.

        Raises:
            LaunchError: as :func:`~launcher.launch_lock.hold_run_dir` says.
        """
        if self._claim is not None:
            return
        self._claim = hold_run_dir(self.run_dir)
        self.messages.begin()  # from its first message on: a stalled stderr blocks none

    def unclaim(self) -> None:
        """Let the run directory go, where :meth:`claim` holds it (a launch refused or stopped
        before :meth:`run`, which lets it go at its end): closing the lock drops the flock."""
        self.messages.end(child_waits.OUTPUT_DRAIN_SECONDS)  # a refusal: its messages written
        if self._claim is not None:
            os.close(self._claim)
            self._claim = None

    @property
    def _signals(self) -> list[int]:  # the stop signals that came, in order (Arrivals)
        return self._arrivals.signals()

    @property
    def stopped_by(self) -> int | None:
        """The first stop signal the launcher got (SIGINT, SIGTERM, ...), None where none came."""
        return self._signals[0] if self._signals else None

    def _stop_now(self) -> bool:
        """Whether a stop signal asked to stop now (:meth:`Arrivals.stop_now`: not the first
        one repeated): the end's bounded waits on a slow output are cut short (not the held
        pipes' drain into the logs: the record)."""
        return self._arrivals.stop_now() is not None

    def _attempt(self, specs: list[ChildSpec], restart: int) -> Failure | None:
        """Start the children, watch them until the attempt ends, stop what is left."""
        children: list[Child] = []
        failed, self._finished, self._outstayed = None, False, None
        try:
            try:
                for spec in specs:
                    log_path = self.run_dir / "logs" / f"{spec.name}.log"
                    # where a child whose launcher died appends its last lines itself
                    env = {**(spec.env or os.environ), ENV_LOG_FILE: str(log_path)}
                    spec = replace(spec, env=env)  # an empty env: the launcher's own
                    render = None
                    if self.lines is not None:
                        render = partial(self.lines.child_line, spec.role, spec.rank, restart)
                    out = self._terminal or self.out
                    with deaf():  # its threads: the main thread takes the stop signals
                        child = Child(spec, log_path, out, self._lock, render, self.say)
                    children.append(child)
                failed = self._watch(children)
            finally:  # also when a later child cannot start: the others get their grace
                found = self._stop(children, failed)  # who was stopped: the blame weighs it
        finally:
            for child in children:
                child.finish(self._stop_now)
            if self._terminal is not None:  # their lines first, then what is said of them
                self._terminal.written(child_waits.OUTPUT_DRAIN_SECONDS, self._stop_now)
            for child in children:
                if child.output_held:  # a process outside its group, or a stalled output
                    self.say(child.output_held)
                    self._pumping.append(child)
        if failed is None:
            return None
        return attempt_failure(failed, children, self._outstayed, self._stopped, found, restart)

    def _watch(self, children: list[Child]) -> Child | None:
        """The first child to fail, also where a signal came after it; None when every worker
        succeeded (:attr:`_finished`) or a signal came first.

        A server that exits while a worker runs fails the attempt (the workers would wait on
        it until their own timeout), but an exit 0 only where the workers do not all exit 0
        within the grace (a shard signalled alone drains until their ``bye``:
        :mod:`launcher.drained_shard`); so does a child overdue after it reported its end
        (:meth:`Child.overdue`) but not its success."""
        workers = [c for c in children if c.spec.role != "server"]
        while True:
            signalled = bool(self._signals)  # read first: a failure seen below came before
            working = any(c.poll() is None for c in workers)
            first = first_failed(children, working)
            arrivals, poll = self._arrivals, self.poll_interval
            if first is not None and first.exited_at < arrivals.first_at:
                if self._drained(first, workers):
                    continue  # every worker finished: the next look ends the attempt
                if not first.victim:  # a stop: the ranks' own exits first (stopped_together)
                    return stopped_together(first, workers, self.settle, poll, arrivals)
                failed, self._outstayed = settle(
                    first, children, workers, self.settle, poll, arrivals
                )
                return failed
            stuck = None if signalled else first_overdue(workers, self.poll_interval)
            if stuck is not None:  # a Hydra that stays after its ranks' end (now and then)
                failed, why, self._finished = stuck  # finished: all its ranks had succeeded
                self.say(why, level="info" if self._finished else "error")
                return failed
            if not working and all(c.exited_at < self._arrivals.first_at for c in workers):
                self._finished = True  # the signal, if one came, came after
                return None
            if signalled:  # an end mpiexec reported before it stands
                failed, self._finished = reported_before(workers, self._arrivals.first_at)
                return failed
            time.sleep(self.poll_interval)

    def _drained(self, first: Child, workers: list[Child]) -> bool:
        """Whether ``first``, the first failure, is a shard's exit 0 after which every worker
        finished (:func:`workers_finish`), which is then said: no failure."""
        if first.spec.role != "server" or first.poll() != 0:
            return False
        if not workers_finish(first, workers, self.grace, self.poll_interval, self._arrivals):
            return False
        who = f"{first.spec.role} {first.spec.rank}"
        self.say(f"{who} stopped on its own signal once the workers said bye")
        return True

    def _stop(self, children: list[Child], failed: Child | None = None) -> StopFindings:
        """Stop what is left of ``children`` (:func:`stop_gang`), saying why where a signal to
        the launcher is the cause; the processes it found stopped, looked for only where a
        child ``failed`` (a success's stop of its shards reads no ``/proc``)."""
        self._stopped = [c for c in children if c.poll() is None]  # ended by it, if by a signal
        cause = None
        if self._signals and failed is None and not self._finished:
            cause = f"got {signal_name(self._signals[0])}; stopping every child"
        return stop_gang(
            children,
            self.grace,
            self.poll_interval,
            self._arrivals,
            self.say,
            cause,
            find_stopped=failed is not None,
        )

    def _drain_logs(self) -> None:
        """What the held pipes still hold, into the logs, bounded (:func:`drain_held`)."""
        drain_held(self._pumping, self.say)

    def _report(self, failure: Failure, max_restarts: int, then: str | None = None) -> None:
        """The failure on stderr and in ``failure.json`` (:func:`report_failure`)."""
        to_give = None if self.run_named else self.job_id  # the way on's --job-id
        report_failure(
            self.messages, self.run_dir, failure, max_restarts, then, to_give, self.train
        )
