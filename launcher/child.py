"""One child process of a launched job: its process group, its output and log, its end.

A child runs in its own session (so its own process group, signalled as a whole), asks the
kernel for SIGTERM when the launcher dies (Linux), and has a thread copying each whole output
line, prefixed, to the launcher's stdout and, bare, to its log (a line over :data:`READ_PIECE`
a piece at a time, never held whole: :mod:`launcher.child_output`); mpiexec's pipe has a keeper
that takes over once the launcher dies (:mod:`launcher.output_keeper`). :meth:`Child.failure` says
how it ended, for the report (:mod:`launcher.failure`; :mod:`launcher.supervisor` for the gang
rules).
"""

from __future__ import annotations

import collections
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

from distconv.files import describe_os_error

from .attempt_marker import attempt_marker
from .child_output import ChildOutput
from .child_spec import ChildSpec
from .commands import LaunchError
from .failure import PEER_FAILED_STATUS, TAIL_LINES, Failure, signal_name
from .long_line import READ_PIECE as READ_PIECE  # still importable from here
from .long_line import OutputPipe
from .long_line import continued_prefix as continued_prefix
from .named_cause import told
from .out_holder import held_by_another_job, note_started
from .output_keeper import reap_keeper, start_keeper
from .output_waits import OutputWaits, PumpWrites, held_output, joined
from .process_group import ChildGroup, parent_death_signal
from .process_group import running_groups as running_groups  # still importable from here
from .pump import ChildLog, PumpFiles
from .shown import shown
from .startable import not_started

#: seconds a child's output may still flow once its group is gone (then a process outside the
#: group holds the pipe, and the launcher stops waiting for it)
OUTPUT_DRAIN_SECONDS = 5.0
#: seconds a child may run on after the line by which it reported its work's end
#: (:attr:`TailReader.ends`: mpiexec's report of its ranks' statuses), before it is stopped as
#: failed. Hydra prints its statuses once every process is reaped, and Open MPI its "noticed"
#: line as it tears the job down: what is left takes milliseconds, a few seconds for a job over
#: many hosts; a Hydra that stays after it (now and then, under load) would never end. Short
#: beside a test's or a user's patience, long beside a loaded host's scheduling delays.
WRAPUP_SECONDS = 10.0
#: seconds between two looks at a child's wrap-up, beyond the time the caller means between
#: them (:meth:`Child.overdue`'s ``every``: the supervisor's poll, 50 ms), by which the launcher
#: itself was not running (stopped by Ctrl-Z, a frozen container): nothing read the child's
#: pipe meanwhile, so that time is not the child's own in its wrap-up
LAUNCHER_GAP_SECONDS = 1.0
#: seconds the end of a child waits for its output's keeper (:mod:`launcher.output_keeper`),
#: which ends within a look of the pipe's end; one a stray's pipe holds is not waited for
KEEPER_SECONDS = 1.0
#: the roles whose output a keeper holds on past the launcher's death: mpiexec's, whose ranks'
#: lines reach it through Hydra and which died of the broken pipe, its ranks with it. A worker
#: of a local launch sees its reader gone itself and points its output at its log
#: (distconv.launch_env.keep_lines_in_log: when its watch of the launcher sees it end, and at
#: a dead launcher's SIGTERM in distconv.epoch_run); a keeper holding its pipe would hide that.
#: A shard does neither: what it writes after the launcher's death (its stop's checkpoint line,
#: its stats) is lost with the pipe, as docs/operations.md says of a launcher killed outright
KEPT_OUTPUT_ROLES = ("mpiexec",)


class Child(ChildOutput):
    """A running child: its process, its log, and the thread copying its output."""

    def __init__(
        self,
        spec: ChildSpec,
        log_path: Path,
        out: BinaryIO,
        lock: threading.Lock,
        render: Callable[[bytes], bytes] | None = None,
        say: Callable[[str], None] | None = None,
    ):
        """``render``: what ``out`` gets for each output line (ending in a newline); by
        default the line behind the spec's prefix. ``say``: the launcher's message when the
        log cannot be written (a full disk); the lines go on to ``out``."""
        self.spec = spec
        #: monotonic time the process exited, set by the waiter thread (None while it runs)
        self.exited_at: float | None = None
        self.log_path = log_path
        # the report's tail at least, whatever fewer lines a reader reads
        kept = TAIL_LINES if spec.reader is None else max(TAIL_LINES, spec.reader.lines)
        self.tail: collections.deque[str] = collections.deque(maxlen=kept)
        #: (monotonic time, line) of the first line that reported its end (TailReader.ends)
        self.reported_end: tuple[float, str] | None = None
        self._ends = None if spec.reader is None else spec.reader.ends
        #: reported_end's line and the next, as many as the tail keeps: reported_success()'s
        self.since_end: list[str] = []
        self._after_end = 0  # lines read from reported_end's on, however many since_end keeps
        self._before_end: list[str] = []  # the tail's lines before reported_end's, at it
        self._waits = OutputWaits()  # the pump's on ``out``: since when, and after reported_end
        self._looked_at: float | None = None  # overdue()'s last look, and the launcher's gaps
        self._launcher_gaps = 0.0  # (summed apart from _waits: another thread adds to those)
        # first: a child never runs without its log; unbuffered, so it is whole at any moment
        try:
            self.log = open(log_path, "ab", buffering=0)
        except OSError as exc:  # it said '[Errno 21] Is a directory: PATH', naming no child
            why = describe_os_error(exc)
            raise LaunchError(
                f"cannot start {spec.name}: its log {shown(log_path)}: {why}"
            ) from None
        if (marker := attempt_marker(spec.env)) is not None:  # where this attempt's lines begin
            with contextlib.suppress(OSError):  # a full disk: its first line's write says it
                # as the output gives a line: a JSON object under --log-format json, whose
                # worker logs a collector parses line by line
                self.log.write(marker if render is None else render(marker))
        self._log_writes = ChildLog(self.log, log_path, spec.name, say)
        self._writes = PumpWrites(self._waits, self._log_writes)  # both: do they hold it up
        try:
            self.proc = subprocess.Popen(
                list(spec.argv), env=spec.env or None, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: we signal the group
                pass_fds=spec.fds,
                preexec_fn=parent_death_signal(),
            )  # fmt: skip
        except OSError as exc:  # ENOENT for a script that is there: a '#!/bin/sh\r' line
            self.log.close()
            why = not_started(spec.argv[0], exc, spec.env.get("PATH") if spec.env else None)
            raise LaunchError(f"cannot start {spec.name} ({shown(spec.argv[0])}): {why}") from None
        except BaseException:
            self.log.close()
            raise
        note_started(self.proc.pid)  # its lock, still held at a restart, is this launch's own
        self._status: int | None = None  # the exit status, set by the waiter thread
        # its process group, led by it; mpiexec's with what it started outside it (its ssh)
        self.group = ChildGroup(self.proc.pid, strays=spec.role == "mpiexec")
        #: set by finish() where the output could not be drained: what the launcher says
        self.output_held: str | None = None
        self._drains = False  # set with it but for a hung log: drain_log waits
        self._files = PumpFiles(self.proc.stdout, self.log)  # the pump's too: see _drained
        pump = self._files.held_by(self._copy)
        self._pump = threading.Thread(
            target=pump, args=(out, lock, render), name=f"pump-{spec.name}", daemon=True
        )
        self._waiter = threading.Thread(target=self._wait, name=f"wait-{spec.name}", daemon=True)
        self._output: OutputPipe | None = None  # what the pump reads (a pipe of its own)
        self._keeper = None  # reads the pipe once the launcher is gone (KEPT_OUTPUT_ROLES)
        try:
            if spec.role in KEPT_OUTPUT_ROLES:
                self._keeper = start_keeper(self.proc.stdout.fileno(), log_path)
            self._output = OutputPipe(self.proc.stdout.fileno())
            self._pump.start()
            self._waiter.start()
        except BaseException as exc:  # nothing would hold it: killed, not left running
            self._abandon()
            if isinstance(exc, RuntimeError):  # can't start new thread: a pids limit
                raise LaunchError(
                    f"cannot start {spec.name}'s threads: {exc} (a limit on processes or threads?)"
                ) from None
            if isinstance(exc, OSError):  # no descriptor left for the pump's wake-up pipe
                raise LaunchError(f"cannot start {spec.name}: {describe_os_error(exc)}") from None
            raise

    def _abandon(self) -> None:
        """Kill and reap the group of a child whose threads did not all start; drain it."""
        self.signal_group(signal.SIGKILL)
        self.group.close()
        self.proc.wait()
        self._drained()
        reap_keeper(self._keeper, KEEPER_SECONDS)

    def _drained(self, stop: Callable[[], bool] | None = None) -> bool:
        """Wait up to :data:`OUTPUT_DRAIN_SECONDS` (till ``stop()``: a second stop signal),
        from when the pump (if started) reads, for it to reach the pipe's end, then close the
        pipe and log (the log gets the rest: Supervisor._drain_logs); False where it did not
        (:attr:`output_held` says why; the pump closes them as it ends): then, unless a write to
        the launcher's output holds it up all along, it passes on the line under way
        (:meth:`OutputPipe.end_line`), and if no process holds the pipe, ends as late as that."""
        if self._output is not None:  # a pump that has read nothing yet would lose it all
            self._output.await_reader(self._pump.is_alive)
        since = time.monotonic()  # a write under way from before: the output holds the pump
        joined(self._pump, OUTPUT_DRAIN_SECONDS, stop)
        if self._pump.is_alive() and not self._waits.waiting_since(since) and self._output:
            since = time.monotonic()  # a stray holds the pipe, or the host runs the pump late
            stuck, ends = self._writes.stuck_after(OUTPUT_DRAIN_SECONDS), self._output.end_line
            if ends(OUTPUT_DRAIN_SECONDS, stuck, stop) and self._output.unheld():
                joined(self._pump, OUTPUT_DRAIN_SECONDS, stop)  # only late: it reads the end now
        held = self._pump.is_alive()  # unheld: no stray holds the pipe, its writes slowed it
        unheld = held and self._output is not None and self._output.unheld()
        if self._output is not None:  # its wake-up pipe: now, or as the pump ends
            self._output.close()
        # closed now, or by the daemon pump as it ends: it goes on into the log while it can
        self._files.let_go(1 if self._pump.ident is not None else 2)  # 2: it never started
        if held:
            stalled, hung = self._writes.held_up(since)  # since the ask, or a later look
            cut = hung and stop is not None and stop()  # the wait cut: slow is not hung,
            if cut:  # nor said to reach the log whole: the end's drain is bounded
                hung = self._writes.held_up(time.monotonic() - OUTPUT_DRAIN_SECONDS)[1]
            said = held_output(self.spec.name, self.log_path, stalled, hung, unheld, cut)
            self.output_held, self._drains = said, not hung  # a stray's pipe too: what it holds
        return not held

    def _wait(self) -> None:
        """Record the exit, without reaping where the OS allows (``WNOWAIT``): the zombie
        keeps the pid, hence the group's id, ours until :meth:`finish` reaps it, so a stop
        never signals a later process group that was given the same id."""
        if hasattr(os, "waitid"):
            try:
                info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOWAIT)
            except ChildProcessError:  # reaped already
                pass
            else:
                exited = info.si_code == os.CLD_EXITED
                self._status = info.si_status if exited else -info.si_status
                self.group.leader_kept = True  # a zombie: killpg(pid, 0) would always answer
                self.exited_at = time.monotonic()
                return
        self._status = self.proc.wait()
        self.exited_at = time.monotonic()

    def _note_end(self, text: str) -> None:
        """Set :attr:`reported_end` at the first line reporting the child's end, and keep the
        next in :attr:`since_end`: in the tail alone, lines enough after it pushed it out."""
        if self.reported_end is None and self._ends is not None and self._ends(text):
            self.reported_end = (time.monotonic(), text)
            self._before_end = list(self.tail)[:-1]  # a rank's reason, before the report
        if self.reported_end is None:
            return
        self._after_end += 1
        if len(self.since_end) < (self.tail.maxlen or 0):
            self.since_end.append(text)

    def poll(self) -> int | None:
        """The exit status once the waiter has recorded the exit time, else None."""
        return self._status if self.exited_at is not None else None

    def failed(self) -> bool:
        """Whether it ended and failed: a non-zero status, but not a signal after it reported
        that all its processes succeeded (:meth:`reported_success`; a stop that reached it
        before the launcher's own handler ran, or alone): its job had finished."""
        status = self.poll()
        if status is None or status == 0:
            return False
        return status > 0 or not self.reported_success()

    def overdue(self, every: float = 0.0) -> str | None:
        """The line by which it reported its end, where it still runs :data:`WRAPUP_SECONDS`
        after it (:func:`launcher.wrapup.overdue_said` says why it is stopped); else None. Its
        pump's waits on the launcher's own output (:meth:`_write`), which block it, do not count
        (stalls in full, the shorter waits up to WRAPUP_SECONDS: :mod:`launcher.output_waits`),
        nor do gaps between two looks over :data:`LAUNCHER_GAP_SECONDS` beyond ``every`` (the
        seconds the caller sleeps between its looks): the launcher was stopped."""
        if self.reported_end is None or self.exited_at is not None:
            return None
        at, line = self.reported_end
        now, last = time.monotonic(), self._looked_at or at
        self._looked_at = now
        if now - last > every + LAUNCHER_GAP_SECONDS:  # beside a write: at worst counted twice
            self._launcher_gaps += now - last
        held = self._waits.held_up(now, WRAPUP_SECONDS) + self._launcher_gaps
        return None if now < at + WRAPUP_SECONDS + held else line

    def reported_success(self) -> bool:
        """Whether its lines from the report of its end on (:attr:`since_end`) say that every
        one of its processes succeeded (:attr:`TailReader.succeeded`): stopped when
        :meth:`overdue`, it failed nothing."""
        reader = self.spec.reader
        return reader is not None and reader.succeeded(list(self.since_end))

    def signal_group(self, signum: int) -> None:
        """Send ``signum`` to the child's process group, if any of it is left; mpiexec's
        SIGKILL also to what it started that left the group, found at a signal while it ran
        (:mod:`launcher.strays`)."""
        self.group.signal(signum, leader_runs=self.exited_at is None)

    def group_alive(self, running: set[int] | None) -> bool:
        """Whether a process of the child's group still runs, given ``running``:
        :func:`running_groups` (zombies do not count, such as the leader the waiter left
        unreaped; None, without /proc: any member, as the kernel says)."""
        return self.exited_at is None or self.group.alive(running)

    def finish(self, stop: Callable[[], bool] | None = None) -> None:
        """Kill whatever is left of the group, reap, drain the output, close the log.

        Output still flowing :data:`OUTPUT_DRAIN_SECONDS` after the group is gone comes from a
        process that left the group but kept the pipe, or waits on the launcher's own output,
        which nothing reads: it is not waited for (closing the pipe here would block until the
        pump lets go), once what came of its last line is passed on, and :attr:`output_held`
        says which; nor once ``stop()`` holds (a second stop signal).
        """
        self.signal_group(signal.SIGKILL)
        self.group.close()
        self.proc.wait()
        self._waiter.join()
        self._drained(stop)
        reap_keeper(self._keeper, KEEPER_SECONDS)

    def drain_log(self, timeout: float) -> bool:
        """Up to ``timeout`` s for a held pump to drain its pipe (:meth:`OutputPipe.drain`)."""
        return not self._drains or self._output is None or self._output.drain(self._pump, timeout)

    @property
    def victim(self) -> bool:
        """Whether it is a worker that exited because another rank failed."""
        return self.spec.role == "worker" and self.poll() == PEER_FAILED_STATUS

    def failure(self, restart: int, others: Sequence[Child] = ()) -> Failure:
        """What went wrong, for the report; call after :meth:`finish` so the tail is whole.
        The reader reads the tail led by the lines that the lines after the report of its end
        pushed out of it: those before that report (a rank's reason), and those of
        :attr:`since_end` (Hydra's statuses). ``others``: the other children; those that
        stopped because of it are its victims, and their lines may name it (:func:`told`)."""
        lines, reader = list(self.tail), self.spec.reader
        left = max(self._after_end - len(lines), 0)  # lines from the report on, pushed out
        before = self._before_end  # those of them pushed out, the report in the tail or not
        before = before[: max(len(before) + self._after_end - len(lines), 0)]
        read = [*before, *self.since_end[:left], *lines]  # no overlap, nor a line twice
        code, cause = (self.poll(), None) if reader is None else reader.read(read, self.poll())
        peers = [(o.spec.role, list(o.tail)) for o in others]
        cause = told(cause, self.spec.role, self.spec.rank, read, peers)
        env = self.spec.env or {}
        job_id, launch = env.get("DISTCONV_JOB_ID"), env.get("DISTCONV_LAUNCH")
        if (held := held_by_another_job([*read[-1:], cause or ""], job_id, launch)) is not None:
            cause = held if cause is None else f"{cause}; {held}"  # restarted never (its words)
        number = -code if code is not None and code < 0 else None
        return Failure(
            role=self.spec.role,
            rank=self.spec.rank,
            exit_code=None if number else code,
            signal=signal_name(number) if number else None,
            log=str(self.log_path),
            log_error=self._log_writes.error,
            tail=lines[-TAIL_LINES:],
            restart=restart,
            signal_number=number,
            cause=cause,
            victims=[
                dict(role=v.spec.role, rank=v.spec.rank, exit_code=v.poll(), log=str(v.log_path))
                for v in others
                if v.victim
            ],
        )
