"""How a running fit is asked to stop: SIGTERM, or Ctrl-C once.

SIGTERM is how schedulers stop a job (a pod's eviction, ``kill``, the launcher's own stop), and
Ctrl-C is how a person does: ``mpiexec`` forwards its first Ctrl-C to every rank as SIGINT
("Press Ctrl-C again to force abort"). Either one asks the trainer to stop at the next step the
ranks agree on, with a checkpoint, so no work is lost. A second Ctrl-C raises
:class:`KeyboardInterrupt`, for a job stuck where no step ends, as soon as Python runs again
(but for a sync applying a step's updates, which it never splits: :mod:`distconv.held_updates`;
it then says it waits for them, and a third Ctrl-C stops at once): inside a blocking MPI call
that is when the call returns, so there ``mpiexec``'s own second Ctrl-C (it kills the ranks) or
the MPI watchdog ends the job.

SIGINT is taken over only from Python's default handler: an application's own handler stays,
and so does SIGINT ignored (``nohup``, a shell's ``&``), which must keep meaning "not for me".
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distconv.held_updates import hold_interrupt
from distconv.launch_env import ended_launcher
from distconv.logs import as_log_line
from distconv.restorable import restorable

log = logging.getLogger("distconv.trainer")  # said at a fit's end, as its other lines

#: the command line's exit status after a stop by each signal (128 + its number)
EXIT_STATUS = {signal.SIGTERM: 143, signal.SIGINT: 130}
#: what the first Ctrl-C says (on a line of its own: the terminal echoed ``^C``)
ANNOUNCEMENT = (
    "distconv: Ctrl-C: stopping at the next step the ranks agree on, with a checkpoint "
    "where one is written; Ctrl-C again stops at once"
)
#: what a second Ctrl-C says where it waits for the step's updates (held_updates)
HELD = (
    "distconv: Ctrl-C again: stopping once this step's updates are all made, so the weights "
    "hold a whole step; Ctrl-C a third time stops at once, maybe with the step applied in part"
)

#: the first stop signal while a StopRequest's handlers are in place, and when (monotonic)
_pending: tuple[signal.Signals, float] | None = None
#: the stop signals a fit received and did not stop by (one after its last check step, in its
#: last epoch's evaluation or checkpoint): the next fit of this process stops by them
_unanswered: frozenset[int] = frozenset()
#: the pid of this process's launcher, where a SIGTERM came once it had ended (the kernel's
#: parent-death signal, or this process's own as it saw the launcher gone:
#: :func:`~distconv.launch_env.ended_launcher`): the stop line then says so, not only the
#: signal, which reads as a scheduler's stop
_launcher_gone: int | None = None
#: False while a command runs its process's one fit (``distconv train``:
#: :func:`~distconv.stop_kept.kept_said_at_stop`): a stop signal after the fit's last check is
#: handed on unwarned, for the command to :func:`drop_carried` and say in its own words (the
#: warning speaks of a later fit of the process, which it has none of)
warns_handed_on = True


def pending() -> tuple[signal.Signals, float] | None:
    """The signal this process was first asked to stop by, and when (``time.monotonic()``),
    while a :class:`StopRequest`'s handlers are in place; None when no stop is asked.

    Process-wide, for a transport's waits (:mod:`distconv.sync.ps.channel`): a stop comes at
    the next step boundary, and a wait that never ends because a peer is gone must not keep
    the process from it until its SIGKILL.
    """
    return _pending


class StopRequest:
    """Which stop signals this rank received during one fit, and the handlers that record them.

    Args:
        announce: say on stderr, at the first Ctrl-C, what happens next (the chief does; every
            rank of an ``mpiexec`` job gets the same Ctrl-C).
    """

    def __init__(self, announce: bool = True) -> None:
        self.announce = announce
        self.received: set[int] = set()
        #: the signals an earlier fit handed on, which this one took in (:meth:`install_for_fit`)
        self.carried: frozenset[int] = frozenset()
        #: a stop was agreed on (or a second Ctrl-C raised): what it received is done with
        self.answered = False

    @property
    def flags(self) -> list[float]:
        """This rank's requests, for the ranks' sum: ``[SIGTERM received, SIGINT received]``."""
        return _flags(self.received)

    def install_for_fit(self) -> Callable[[], None]:
        """:meth:`install` for a fit, which carries a stop from one fit to the next: this
        request starts with the signals an earlier fit of this process received and did not
        stop by, and the function it returns, which puts the previous handlers back, leaves
        those of this request for the next fit where this one returned without stopping by them
        (a warning says so: that fit may start much later, in a notebook's next cell; one that
        ended in an exception hands on none it received itself, :meth:`ended_by`). A scheduler's
        SIGTERM during a fit's last evaluation then stops the script's next fit, instead of
        being forgotten until the scheduler's SIGKILL.

        Only the main thread handles signals (a test can run ranks as threads): elsewhere this
        installs nothing, and carries nothing.
        """
        global _unanswered
        if threading.current_thread() is not threading.main_thread():
            return lambda: None
        self.carried, _unanswered = _unanswered, frozenset()
        restore = self.install()
        self.received |= self.carried
        _say_taken_in(self.carried)
        signum = stop_signal(self.flags)
        if signum is not None:  # asked again from this fit's start: a wait's patience counts
            _pending_since(signum)

        def restore_and_hand_on() -> None:
            global _unanswered
            restore()
            if not self.answered:
                _unanswered = frozenset(self.received)
                if warns_handed_on:
                    _say_handed_on(self.flags)

        return restore_and_hand_on

    def ended_by(self, error: BaseException) -> None:
        """``error`` ended the fit, which hands on no stop it received: it did end, if not at
        a check, and its caller sees why. An error (a parameter server's wait gives up once a
        stop was asked and a shard stays silent) or :class:`Preempted` answers this fit's
        signals. One carried from an earlier fit stays for the next, whether this fit had not
        taken it in yet (an error in setup) or had and ended in an error before its first
        check (a shard gone in its first steps): that error was not the stop, and a script's
        retry must still stop by a scheduler's SIGTERM (a warning says it is carried still).
        A :class:`KeyboardInterrupt` (a second Ctrl-C, or one before the handlers were in
        place, in setup, which Python's own handler raised) answers that carried one too: the
        person stopped it, and no later fit (a notebook's next cell's) stops by it."""
        global _unanswered
        stopped, self.answered = self.answered, True
        if isinstance(error, KeyboardInterrupt):
            _unanswered = frozenset()
        elif self.carried and not stopped:  # taken in, and not stopped by: still carried
            _unanswered |= self.carried
            _say_handed_on(_flags(self.carried))

    def install(self) -> Callable[[], None]:
        """Handle SIGTERM, and SIGINT where Python's default handler has it (main thread only).

        Returns:
            A function that puts the previous handlers back.
        """
        global _pending
        _pending = None  # a fit's own: an old signal is done
        previous = {signal.SIGTERM: signal.getsignal(signal.SIGTERM)}
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            previous[signal.SIGINT] = signal.default_int_handler
        for signum in previous:
            signal.signal(signum, self._on_signal)

        def restore() -> None:
            global _pending
            for signum, handler in previous.items():
                signal.signal(signum, restorable(handler))
            _pending = None  # after: a signal until then runs our handler, which sets it

        return restore

    def _interrupt(self) -> None:
        """Stop now, by the second Ctrl-C (held while a sync applies a step's updates)."""
        self.answered = True  # by the interrupt: no later fit stops by it again
        raise KeyboardInterrupt

    def _on_signal(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGINT:
            if signal.SIGINT in self.received:  # the second Ctrl-C: stop now, but never
                if hold_interrupt(self._interrupt):  # between a step's updates (a third: now)
                    self._say(HELD)  # said: the wait may be long (a slow layer's backward)
                    return
                self._interrupt()
        self.received.add(signum)  # first: the request stands even if it cannot be said
        if signum == signal.SIGTERM:
            _note_launcher_gone()
        if _pending is None:
            _pending_since(signal.Signals(signum))
        if signum == signal.SIGINT:
            self._say(ANNOUNCEMENT)

    def _say(self, words: str) -> None:
        """Say ``words`` on stderr, where this request announces (the chief's)."""
        if not self.announce:
            return
        try:  # os.write: a handler may run in the middle of a print
            os.write(2, _announcement(words))
        except OSError:  # stderr closed, or a pipe whose reader (tee) got the same Ctrl-C
            pass


def drop_carried() -> frozenset[int]:
    """Drop the stop an earlier fit handed on (a signal after its last stop check), so the
    process's next fit does not stop by it: for a notebook or a REPL whose next fit is not the
    same job, and a test suite, where one test's signal must not stop the next test's fit.
    Returns the signals dropped (empty: none was carried)."""
    global _unanswered
    dropped, _unanswered = _unanswered, frozenset()
    return dropped


def _say_taken_in(carried: frozenset[int]) -> None:
    """Warn, at the start of the fit that a stop an earlier fit handed on stops, why it stops:
    the earlier fit's warning may be far back (a notebook's other cell's output)."""
    signum = stop_signal(_flags(carried))
    if signum is not None:
        log.warning(
            "this fit stops at its first stop check, if any, by the %s an earlier fit of this "
            "process got after its last one (distconv.stop_request.drop_carried() before a fit "
            "drops it)",
            signum.name,
        )


def _say_handed_on(flags: list[float]) -> None:
    """Warn that a stop this fit did not stop by (``flags``: its request's) waits for the
    process's next fit: else that fit, started later, maybe by hand in the same interpreter,
    stopped at its first check by a signal nobody connected with it."""
    signum = stop_signal(flags)
    if signum is not None:
        log.warning(
            "this process got %s after a fit's last stop check, and no fit has stopped by it "
            "yet: a later fit of this process, if any, stops by it at its first check "
            "(distconv.stop_request.drop_carried() drops it)",
            signum.name,
        )


def _flags(signals: set[int] | frozenset[int]) -> list[float]:
    """``signals`` as :attr:`StopRequest.flags` reads them: ``[SIGTERM in, SIGINT in]``."""
    return [float(signal.SIGTERM in signals), float(signal.SIGINT in signals)]


def _note_launcher_gone() -> None:
    """At a SIGTERM: note the launcher's pid where it has ended by now, so that the stop says
    it (:class:`Preempted`)."""
    global _launcher_gone
    if _launcher_gone is None:
        _launcher_gone = ended_launcher()


def launcher_gone_words(said: str, exit_status: int) -> str:
    """A stop's line ``said`` (``stopped by SIGTERM after step N``), followed, where this
    process's SIGTERM came once its launcher had ended, by ``(the launcher, pid P, ended)``:
    the line's start stays as the launcher and tests read it."""
    if exit_status != EXIT_STATUS[signal.SIGTERM] or _launcher_gone is None:
        return said
    words = f" (the launcher, pid {_launcher_gone}, ended)"
    return said if said.endswith(words) else said + words  # an unpickled one has them


def _pending_since(signum: signal.Signals) -> None:
    """Make ``signum`` the process's :func:`pending` stop, asked now."""
    global _pending
    _pending = (signum, time.monotonic())


#: set while :func:`distconv.distributed.run_main` runs a script's ``main``, which ends the
#: process on a :class:`Preempted` with one line and its status: a sync closing while one
#: propagates (a ``finally``) then leaves as after a finished run, since every rank raises it
#: at the step they agreed on. Elsewhere an uncaught one would exit 1 (mpi4py's abort), and
#: the MPI sync's own abort is what gives the job its status (143 or 130).
preempted_ends_run = False


#: what :data:`_before_hold` holds while no hold is in place (``signal.signal`` returns None
#: for a handler not installed from Python, which a release must put back all the same)
_NOT_HELD = object()
#: the SIGTERM handler a checkpointed stop's hold replaced (:func:`hold_sigterm_until_exit`)
_before_hold: Any = _NOT_HELD


def hold_sigterm_until_exit() -> None:
    """Ignore SIGTERM from a checkpointed stop until the command ends with the stop's 143: the
    fit put the previous handler back as it returned (Python's default, in a command), so a
    second SIGTERM while the process wound down (a shard's ask stopped it, then its pod's own
    signal came) killed it by the signal, -15 and not 143, its stop line said or about to be.
    :func:`release_sigterm_hold` puts the handler back (a command run in-process returns).
    Main thread only, as handlers are."""
    global _before_hold
    if threading.current_thread() is threading.main_thread() and _before_hold is _NOT_HELD:
        _before_hold = signal.signal(signal.SIGTERM, signal.SIG_IGN)


def release_sigterm_hold() -> None:
    """Put back the SIGTERM handler :func:`hold_sigterm_until_exit` replaced, if it did."""
    global _before_hold
    if _before_hold is not _NOT_HELD and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, signal.SIG_DFL if _before_hold is None else _before_hold)
        _before_hold = _NOT_HELD


class Preempted(Exception):
    """SIGTERM or Ctrl-C arrived; the trainer saved a checkpoint at the step it names (where it
    writes any) and stopped.

    Attributes:
        exit_status: the command line's exit status for it, also an aborted MPI job's: 143
            after SIGTERM, 130 after Ctrl-C (128 + the signal's number).
        step: the step the ranks stopped after, which the checkpoint holds; None where no fit
            raised it (a script's own).
        out_dir: the fit's output directory, the checkpoint's (None: it saved nothing).
        is_chief: whether this rank wrote the checkpoint, and so says what it kept.
        world_size: the ranks the fit ran on, each stopped alike.
    """

    def __init__(
        self,
        message: str,
        exit_status: int = 143,
        *,
        step: int | None = None,
        out_dir: Path | None = None,
        is_chief: bool = True,
        world_size: int = 1,
    ) -> None:
        super().__init__(launcher_gone_words(message, exit_status))
        self.exit_status = exit_status
        self.step, self.out_dir = step, out_dir
        self.is_chief, self.world_size = is_chief, world_size

    def __reduce__(self) -> tuple[type, tuple[str, int], dict[str, Any]]:
        # a pickled one keeps its status, where it stopped, and its notes
        return type(self), (str(self), self.exit_status), self.__dict__


def stop_signal(flags: list[float]) -> signal.Signals | None:
    """The signal a job stops by, from the ranks' summed :attr:`StopRequest.flags` (None: it
    goes on). SIGTERM wins: a scheduler's stop is the one a restart policy must see."""
    term, interrupt = flags
    if term > 0:
        return signal.SIGTERM
    return signal.SIGINT if interrupt > 0 else None


def _announcement(words: str = ANNOUNCEMENT) -> bytes:
    """``words`` (:data:`ANNOUNCEMENT`, :data:`HELD`) as stderr's lines read: a JSON line
    under ``--log-format json``, as every line there is (a raw one broke a collector parsing
    them), else the text on a line of its own, after the ``^C`` a terminal echoed."""
    line = as_log_line(words, logging.WARNING)
    return (line if line != words else "\n" + line).encode("utf-8", "replace") + b"\n"
