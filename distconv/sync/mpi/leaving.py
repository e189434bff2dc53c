"""How a rank leaves an MPI job by aborting every rank, so that no rank is left waiting in a
collective for one that has gone; leaving cleanly, meeting the other ranks a last time, is
:mod:`~distconv.sync.mpi.clean_leave`'s."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from distconv.logs import as_log_line, note_line, noted_line
from distconv.messages import debugging
from distconv.notes import format_exception, unprinted_notes
from distconv.rank_endings import ABORTING_THE_JOB, ending_name, reason_text
from distconv.sync.mpi.before_init import abort_uninitialised  # noqa: F401 - callers' name
from distconv.sync.mpi.held import HeldInterrupt

#: how long a rank waits between its last words and ``Abort`` (see :func:`abort`)
FORWARD_SECONDS = 0.2
#: seconds ``MPI_Abort`` gets before the process ends itself (:func:`last_resort`)
ABORT_GRACE = 10.0

#: errors a user can act on, said without their traceback as a rank aborts the job on them,
#: unless raised from another error (``distconv train`` registers its own;
#: ``DISTCONV_DEBUG=1`` shows the traceback still)
BRIEF_ERRORS: tuple[type[BaseException], ...] = ()

#: the mark of an error a script's ``run_main`` left to an open abort hook while it was brief
#: (:func:`leave_to_hook`): ``run_main`` puts :data:`BRIEF_ERRORS` back as the error leaves it,
#: before the hook gets it. On the error, not held here: a caller that catches it and goes on
#: must not find its frames (its data) kept alive
_LEFT_BRIEF = "distconv_left_brief"


def abort_job(comm: Any, rank: int, error: BaseException | None) -> None:
    """Say why on stderr (with the traceback of an ``error`` that was raised, unless it and
    what it was raised from are :data:`BRIEF_ERRORS`; the notes it carries, PEP 678's, under
    the traceback, else on lines before the line that says why: :func:`said_before_abort`),
    then abort every rank of ``comm``.

    For a rank closing its sync while ``error`` propagates (a ``finally``): the other ranks may
    be waiting in a collective for this one, and nobody may reach the except hook, which would
    have printed the traceback. The last resort (:func:`last_resort`) is armed first: a write to
    a stderr pipe nobody reads blocks too; the pause and the Abort get a whole grace again.
    """
    before = None
    try:  # one write: ranks aborting at once never share a line
        before = last_resort()  # in the try: an error arming it must not stop the abort
        sys.stderr.write(said_before_abort(rank, error))
        sys.stderr.flush()
    finally:  # abort even if printing failed: the other ranks must not hang
        _abort(comm, exit_status(error), before)


def said_before_abort(rank: int, error: BaseException | None) -> str:
    """What :func:`abort_job` writes: the line that says why (:func:`reason`), after the
    traceback of an ``error`` that was raised and is not brief (:func:`_brief`), which its
    notes follow (:func:`~distconv.notes.format_exception`: Python 3.10's prints none, and the
    abort ends the process before the interpreter's exit could say them), else after a line
    for each line of its notes (:func:`_noted_reason`)."""
    if error is not None and error.__traceback__ is not None and not _brief(error):
        return "".join(format_exception(error)) + reason(rank, error, ABORTING_THE_JOB)
    return _noted_reason(rank, error)


def _noted_reason(rank: int, error: BaseException | None) -> str:
    """:func:`reason`'s line, ending the job, after a ``rank N: note: ...`` line for each line
    of the notes ``error`` carries (:func:`~distconv.logs.noted_line`): said without its
    traceback, the error dropped them, which are often the way out."""
    if error is None:
        return reason(rank, error, ABORTING_THE_JOB)
    return noted_line(f"rank {rank}", error, _reason_text(rank, error, ABORTING_THE_JOB)) + "\n"


def _brief(error: BaseException) -> bool:
    """Whether ``error`` is said without its traceback: it and every error it was raised from
    are :data:`BRIEF_ERRORS` (a ``SyncError`` wrapping a bug on the communication thread keeps
    the bug's traceback), and ``DISTCONV_DEBUG`` is not set."""
    if debugging():
        return False
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if not isinstance(cause, BRIEF_ERRORS):
            return False
        seen.add(id(cause))
        cause = cause.__cause__
    return True


def leave_to_hook(error: BaseException) -> None:
    """Note that ``error`` goes on to an open abort hook (:func:`install_abort_hook`), which
    says it in its abort line alone where it is brief now (:data:`BRIEF_ERRORS`, as the
    caller, ``run_main``, has them): a script that never closes its sync aborts on a data error
    as one that closes it in a ``finally`` does (:func:`abort_job`), not after its traceback."""
    if _brief(error):
        try:
            setattr(error, _LEFT_BRIEF, True)
        except (AttributeError, TypeError):  # no attributes of its own: the traceback then
            pass


def _hook_line(comm: Any, error: BaseException) -> str | None:
    """The abort hook's one line for ``error`` where it is brief (now, or when it was left to
    the hook: :func:`leave_to_hook`) and the rank is known, as :func:`abort_job` says it (its
    notes on lines before it); None where the traceback is to be printed."""
    if getattr(error, _LEFT_BRIEF, False) is not True and not _brief(error):
        return None
    try:
        rank = int(comm.Get_rank())
    except Exception:  # noqa: BLE001 - a communicator that cannot say: the traceback then
        return None
    return _noted_reason(rank, error)


def _traceback(etype: type[BaseException], value: BaseException, tb: Any) -> str:
    """The traceback the abort hook prints, its notes under it: the abort ends the process
    before the interpreter's exit could say them on Python 3.10, whose traceback prints none
    (:func:`~distconv.notes.unprinted_notes`)."""
    return "".join([*traceback.format_exception(etype, value, tb), *unprinted_notes(value)])


def _notes_left_out(value: BaseException) -> str:
    """The notes a script's hook (a logger's) left out of its report of ``value``
    (:func:`~distconv.notes.unprinted_notes`), each as the log writes a note's line
    (:func:`~distconv.logs.note_line`): under ``--log-format json`` a JSON object, as the
    logger's report is, not a raw line in the log, marked as a note, not a second error."""
    notes = (note.removesuffix("\n") for note in unprinted_notes(value))
    return "".join(note_line(note) + "\n" for note in notes)


def reason(rank: int, error: BaseException | None, ending: str) -> str:
    """The line a rank leaves on stderr as it ends the job: who, why, and how it ends (an
    error's own full stop dropped before the ``;``; one without a message, as Ctrl-C's
    ``KeyboardInterrupt``, named alone). Under ``--log-format json`` a JSON object
    (:func:`~distconv.logs.as_log_line`): it is the last line of a rank that aborts, which
    never reaches ``distconv train``'s own error line, and a collector parses it too.
    ``ending``: one of :data:`distconv.rank_endings.ENDINGS`, which the launcher reads back
    (:func:`~distconv.rank_endings.reason_text`). An error of the job itself is named as the
    one-line ending names it (:func:`~distconv.rank_endings.ending_name`): a script's own
    ``class BadRows(DataError)`` as ``DataError``, which the launcher does not restart.

    Raises:
        ValueError: ``ending`` is none of them."""
    return as_log_line(_reason_text(rank, error, ending), logging.ERROR) + "\n"


def _reason_text(rank: int, error: BaseException | None, ending: str) -> str:
    """:func:`reason`'s line as text, before the log's JSON takes it."""
    said = str(error).rstrip()
    if said.endswith(".") and not said.endswith(".."):
        said = said[:-1]
    name = (ending_name(error) if error is not None else None) or type(error).__name__
    what = f"{name}: {said}" if said else name
    return reason_text(rank, what, ending)


def exit_status(error: BaseException | None) -> int:
    """The job's exit status for ``error``: its ``exit_status`` (a preempted run's 143), 130 for
    an interrupt, a ``sys.exit`` number, else 1, so ``mpiexec`` reports what the command line
    would."""
    if isinstance(error, KeyboardInterrupt):
        return 130
    if isinstance(error, SystemExit) and isinstance(error.code, int) and error.code:
        return error.code
    return int(getattr(error, "exit_status", 1))


#: the attribute that marks the hook :func:`install_abort_hook` installs, True until closed
_ABORTS_THE_JOB = "distconv_aborts_the_mpi_job"


#: the abort hooks installed in this process and not yet closed (told by the mark), latest last
_open_hooks: list[Callable[..., None]] = []


def is_abort_hook(hook: Any) -> bool:
    """Whether ``hook`` (``sys.excepthook``) is an MPI sync's abort hook, not yet closed (one of
    the open ones, still marked; ``functools.wraps`` copies the mark, not the identity)."""
    return any(hook is h for h in _open_hooks) and getattr(hook, _ABORTS_THE_JOB, 0) is True


def abort_through_open_hook(error: BaseException) -> bool:
    """Hand ``error`` to ``sys.excepthook`` (a hook a script set after ``init()``: a logger's
    sees it), then abort every rank through the latest MPI sync's abort hook still marked open;
    False where none is (nothing done). The script's hook need not hand on to ours: left to it,
    an error ended this rank alone, the others waiting. One that hands on aborts in ours, once;
    one that blocks or raises, all the same. In a real job this does not return (True: a test's)."""
    opened = [hook for hook in _open_hooks if is_abort_hook(hook)]  # not one closed mid-removal
    if not opened:
        return False
    opened[-1](type(error), error, error.__traceback__, sys.excepthook)
    return True


def install_abort_hook(comm: Any) -> Callable[[], None]:
    """Make an uncaught exception print its traceback, then abort the whole job; an error a
    user can act on (:data:`BRIEF_ERRORS`, or one :func:`leave_to_hook` noted) only the line
    that says why, as :func:`abort_job` does, where the default hook would have printed it.

    Without it one rank's crash leaves the others blocked in a collective (and ``mpiexec`` with
    them) until something kills them. The hook is marked (:func:`is_abort_hook`) until closed.

    Returns:
        A function that puts the previous hook back (if ours is still the one installed) and,
        in any case, makes ours hand every later exception to the previous one: two syncs of
        one process closed out of order left the first's hook installed under the second's,
        aborting on a job both had left.
    """
    previous = sys.excepthook
    closed = False
    aborted: list[int] = []  # Aborts that returned (stand-ins'): a script's hook handed on

    def print_and_abort(
        etype: type[BaseException], value: BaseException, tb: Any, hook: Any = None
    ) -> None:
        """``hook``: a script's set over ours, printed through in place of ``previous``."""
        if closed:
            previous(etype, value, tb)
            return
        before, went = None, len(aborted)
        try:
            before = last_resort()  # the hook printing (a logging one) may block
            say = previous if hook is None else hook
            if say is sys.__excepthook__:
                # one write, where the default hook makes a hundred: a rank killed by another's
                # abort then loses its whole message or none of it, never half a line
                sys.stderr.write(_hook_line(comm, value) or _traceback(etype, value, tb))
            else:
                say(etype, value, tb)
                if len(aborted) == went:  # it printed it (else ours did): the notes it left out
                    sys.stderr.write(_notes_left_out(value))
            sys.stderr.flush()
        finally:  # abort even if printing failed: the other ranks must not hang
            if len(aborted) == went:  # else ``hook`` handed on to ours, which aborted
                _abort(comm, exit_status(value), before)
                aborted.append(1)
            elif before is not None:
                before.cancel()

    def restore() -> None:
        nonlocal closed
        # a Ctrl-C held until every step is made: one between them left the hook closed yet
        # marked and listed (counted open: run_main left an error to it, which it neither
        # aborted on nor handed on; its communicator kept alive), and no second close comes
        # to finish it (closes_once). One before the hold: nothing done, the hook still open
        with HeldInterrupt():
            try:  # off the list first (the list orders them; the mark tells them open)
                if print_and_abort in _open_hooks:
                    _open_hooks.remove(print_and_abort)
            finally:  # the rest however the removal ended
                closed = True
                setattr(print_and_abort, _ABORTS_THE_JOB, False)  # left installed: no abort
                if sys.excepthook is print_and_abort:
                    sys.excepthook = previous

    _open_hooks.append(print_and_abort)
    setattr(print_and_abort, _ABORTS_THE_JOB, True)
    sys.excepthook = print_and_abort
    return restore


def abort(comm: Any, status: int) -> None:
    """``comm.Abort(status)``, then end this process should it return (MPICH's can, when
    several ranks abort at once; with ``status``) or raise (by SIGKILL, :func:`end_process`):
    nothing after it may run (a caller's checkpoint, or the gradient communicator freed under a
    thread still inside it). Should it hang, the process ends by itself after
    :data:`ABORT_GRACE` seconds (:func:`last_resort`).

    What this rank wrote is flushed first and given :data:`FORWARD_SECONDS` to travel: the
    launcher ends every rank at the ``Abort``, and Hydra lost the lines it had not forwarded
    yet (the one that says why, 2 runs in 54 on a loaded machine; none in 70 with the pause).
    """
    _abort(comm, status)


def _abort(comm: Any, status: int, before: threading.Timer | None = None) -> None:
    """:func:`abort`; ``before``: the last resort that covered the caller's own stage (its
    printing, the hook it wraps), replaced here by one of a whole grace: a stage that took
    most of the grace and returned must not leave the Abort, and its status, to the SIGKILL."""
    guard = None
    try:  # in the try: a second Ctrl-C as either timer is touched must not skip the Abort
        # armed before the caller's is disarmed: whichever a Ctrl-C interrupts, a last resort
        # still covers the Abort (one disarmed first left a hung Abort to hang for ever)
        guard = last_resort()
        if before is not None:
            before.cancel()
        let_forward()  # the line that says why must reach mpiexec before the Abort ends all
    finally:  # a second Ctrl-C in the pause skipped the Abort: the others waited for ever
        _abort_now(comm, status, guard, before)


def _abort_now(comm: Any, status: int, *timers: threading.Timer | None) -> None:
    """``comm.Abort(status)``, then end the process: by SIGKILL where it raised, else by
    :data:`_exit` once ``timers`` (the last resorts :func:`_abort` holds) are disarmed."""
    try:
        comm.Abort(status)
    except BaseException:  # no abort went out: a signal, which mpiexec always answers
        end_process()
    try:  # it returned: _exit ends the process (a test's stand-in does not); the
        # caller's timer too, which a Ctrl-C as this one was armed left armed
        for timer in timers:
            if timer is not None:
                timer.cancel()
    finally:  # a Ctrl-C as it is disarmed must not skip the end: the process would go on
        _exit(status)


def last_resort() -> threading.Timer:
    """Arm a daemon timer that ends this process (:func:`end_process`) after
    :data:`ABORT_GRACE` seconds, started before ``MPI_Abort``: should it hang, the rank, and the
    job waiting for it, would hang for ever. Returns the timer (``cancel`` disarms it).

    Where no thread can start (exhausted, the very trouble a rank may abort on; or, from Python
    3.12, an interpreter shutting down) the timer is returned unarmed: the abort it guards
    must go out all the same, else the other ranks wait for this one for ever. Anything else
    raised while it starts (a second Ctrl-C) leaves it disarmed: callers arm it inside the
    ``try`` whose ``finally`` aborts."""
    timer = threading.Timer(ABORT_GRACE, end_process)
    timer.daemon = True
    try:
        timer.start()
    except RuntimeError:  # "can't start new thread", or "... at interpreter shutdown"
        pass
    except BaseException:  # a Ctrl-C while its thread started: disarmed, for the caller's
        timer.cancel()  # finally to abort all the same
        raise
    return timer


def end_process() -> None:
    """End this process at once, by SIGKILL (no handler, no clean-up; ``os._exit(1)`` where
    there is no SIGKILL), so that ``mpiexec`` ends the other ranks.

    Not ``os._exit``: MPICH's Hydra ends the others when a rank's PMI connection closes before
    ``MPI_Finalize``, but its proxy also reaps exited ranks (``waitpid``) between events, and a
    rank reaped before the closed connection is read counts as handled, yet only one killed by
    a signal was (its ``WIFSIGNALED`` check). A plain exit status that wins that race leaves
    the others running; a signal is answered on either path. It skips ``MPI_Finalize``, as an
    ``Abort`` does, and leaves nothing in ``/dev/shm`` all the same: the node's MPICH files were
    unlinked as MPI came up (:mod:`~distconv.sync.mpi.shared_memory`).
    """
    kill = getattr(signal, "SIGKILL", None)
    if kill is not None:
        os.kill(os.getpid(), kill)
    os._exit(1)


def let_forward() -> None:
    """Flush stdout and stderr, then wait :data:`FORWARD_SECONDS`: for a rank about to end the
    job (``Abort``, or the watchdog's SIGKILL), whose buffered lines a kill drops and whose
    flushed ones the launcher, ending every rank at once, may not have forwarded yet."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - closed, a broken pipe, a stand-in: end all the same
            pass
    time.sleep(FORWARD_SECONDS)


#: how :func:`abort` ends the process (a name of its own: tests whose stand-in Abort returns
#: replace it)
_exit = os._exit
