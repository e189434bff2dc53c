"""Notes on an exception (PEP 678) on every Python distconv runs on.

A note says what the error's own line cannot: whether the other ranks were told, what a stop
saved and how to go on, a second failure met while handling the first. ``BaseException.add_note``
came in Python 3.11; before it, :func:`add_note` keeps the same ``__notes__`` list, which
distconv's own endings (:func:`distconv.logs.interrupted_line`, :func:`distconv.logs.error_line`)
and a script's ``except`` read alike. The 3.10 interpreter prints no notes under a traceback, so
there they are said where the error is reported, as Python 3.11 says them, not as they are made:
an error a caller catches and handles (a fit tried again after a failed setup) says nothing.
Where the error ends the process uncaught, its notes follow its traceback
(:func:`_say_uncaught_notes`, at exit); where it ends a thread, they follow threading's report
(:func:`_thread_excepthook`); ``distconv train``, ``run_main`` and an MPI sync's abort say them
in their endings (:func:`format_exception`, :func:`unprinted_notes`). An interactive session
whose tracebacks print no notes (IPython before 8.14, the plain REPL) reports each error as it
comes and goes on, with no ending to say them in: there a note is logged as a warning as it is
made (:func:`_logged_as_made`).
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import traceback
from collections.abc import Iterator

log = logging.getLogger(__name__)

#: whether the interpreter keeps and prints notes itself (``BaseException.add_note``)
NATIVE_NOTES = sys.version_info >= (3, 11)

#: the attribute that holds, on an error, the notes logged as they were made (before Python
#: 3.11: :func:`_logged_as_made`), which the reports after do not say twice
_LOGGED = "distconv_notes_logged"

#: whether :func:`_say_uncaught_notes` is registered to run at exit (at the first note)
_at_exit: list[bool] = []


def add_note(error: BaseException, note: str) -> None:
    """Add ``note`` to ``error``'s notes, after any it has: ``error.add_note(note)`` from
    Python 3.11 on. Before, appended to ``error.__notes__`` (made where it has none), said
    where the error is reported (see the module docstring), and logged as a warning as it is
    made only where that report prints no notes (:func:`_logged_as_made`).

    Raises:
        TypeError: ``note`` is not a string, or ``error.__notes__`` is set to something
            other than a list, as ``add_note`` raises from Python 3.11 on.
    """
    if NATIVE_NOTES:
        error.add_note(note)
        return
    if not isinstance(note, str):
        raise TypeError(f"note must be a str, not {type(note).__name__!r}")
    if not hasattr(error, "__notes__"):
        error.__notes__ = []  # the attribute Python 3.11 makes on a first note
    if not isinstance(error.__notes__, list):
        raise TypeError("Cannot add note: __notes__ is not a list")
    error.__notes__.append(note)
    if not _at_exit:
        atexit.register(_say_uncaught_notes)
        _at_exit.append(True)
    _say_notes_of_threads()
    if _logged_as_made():
        log.warning("%s", note)
        setattr(error, _LOGGED, [*getattr(error, _LOGGED, ()), note])


def notes_of(error: BaseException) -> list[str]:
    """``error``'s notes, as Python's traceback reads them: the strings in its ``__notes__``
    where that is a list; none where it has none, or something else there."""
    notes = getattr(error, "__notes__", None)
    return [note for note in notes if isinstance(note, str)] if isinstance(notes, list) else []


def _unsaid_notes(error: BaseException) -> list[str]:
    """``error``'s notes (:func:`notes_of`) but those logged as they were made (before Python
    3.11, where its report prints no notes: :func:`_logged_as_made`): what a traceback adds."""
    logged = getattr(error, _LOGGED, ())
    return [note for note in notes_of(error) if note not in logged]


def format_exception(error: BaseException) -> list[str]:
    """``error``'s traceback, as ``traceback.format_exception`` makes it, with its notes and
    those of the errors in its chain under it before Python 3.11 (from 3.11 the traceback
    holds them, each under its own error)."""
    lines = traceback.format_exception(type(error), error, error.__traceback__)
    return [*lines, *unprinted_notes(error)]


def unprinted_notes(error: BaseException) -> list[str]:
    """The lines (each ending in a newline) that a traceback of ``error`` printed here leaves
    out: the notes of ``error`` and of the errors in its chain (:func:`format_exception`'s)
    before Python 3.11, where ``traceback`` prints none; none where it prints them. For a
    report that ``traceback`` makes (an MPI sync's abort hook's, a logger's hook's)."""
    return [] if _traceback_prints_notes() else list(_chain_notes(error))


def print_exception(error: BaseException) -> None:
    """Print :func:`format_exception` to stderr, as ``traceback.print_exc`` does."""
    sys.stderr.write("".join(format_exception(error)))
    sys.stderr.flush()


def _chain_notes(error: BaseException) -> Iterator[str]:
    """The lines of the notes of ``error`` and of those it was raised from or while handling,
    as a traceback prints the errors (the first raised first), each note not logged already."""
    chain: list[BaseException] = []
    each: BaseException | None = error
    while each is not None and all(each is not seen for seen in chain):  # a loop made by hand
        chain.append(each)
        each = each.__cause__ or (None if each.__suppress_context__ else each.__context__)
    for each in reversed(chain):
        yield from (f"{note}\n" for note in _unsaid_notes(each))


def _traceback_prints_notes() -> bool:
    """Whether ``traceback`` prints notes: from Python 3.11 on, and before where the
    ``exceptiongroup`` backport is imported (pytest, anyio and trio import it), which makes it
    do so."""
    if NATIVE_NOTES:
        return True
    probe = Exception()
    probe.__notes__ = [_PROBE]
    return _PROBE in "".join(traceback.format_exception_only(type(probe), probe))


#: the note of :func:`_traceback_prints_notes`'s probe
_PROBE = "a note traceback prints"


def _interactive() -> bool:
    """Whether this is an interactive session (``python -i``, the REPL, an IPython shell or
    notebook), where errors are shown as they come and the session goes on. IPython imported
    alone (a library's check for a notebook) runs no shell: a plain script's."""
    return hasattr(sys, "ps1") or bool(sys.flags.interactive) or _ipython_shell() is not None


def _ipython_shell() -> object | None:
    """The IPython shell running this session (a terminal's, a notebook kernel's), or None."""
    get_ipython = getattr(sys.modules.get("IPython"), "get_ipython", None)
    try:
        return get_ipython() if callable(get_ipython) else None
    except Exception:  # an IPython half imported, or not IPython's own
        return None


#: the first IPython whose tracebacks show an error's notes, on every Python (8.14, June 2023)
_IPYTHON_SHOWS_NOTES = (8, 14)


def _reports_print_notes() -> bool:
    """Whether the hook that reports an uncaught error here prints its notes (before Python
    3.11): an IPython shell's from IPython 8.14 on, and any other installed hook where
    ``traceback`` prints notes (exceptiongroup's, a logger's: :func:`_traceback_prints_notes`)."""
    if _ipython_shell() is not None:
        version = getattr(sys.modules["IPython"], "version_info", ())
        return tuple(version[:2]) >= _IPYTHON_SHOWS_NOTES
    return sys.excepthook is not sys.__excepthook__ and _traceback_prints_notes()


def _logged_as_made() -> bool:
    """Whether a note made now (before Python 3.11) is logged as it is made, the report of its
    error printing no notes: in an interactive session whose hook prints none
    (:func:`_reports_print_notes`), which has no ending to say them in. Not while an MPI sync's
    abort hook is open: its abort says them (:mod:`distconv.sync.mpi.leaving`), and a note
    logged as made warned of an error the script then handled (a fit tried again)."""
    return _interactive() and not _reports_print_notes()


def _say_notes_of_threads() -> None:
    """Have threading report an error that ends a thread with its notes (before Python 3.11:
    :func:`_thread_excepthook`), where its own hook is the one installed: not over a
    script's. Made at each note: a script that put threading's own back gets it again."""
    if threading.excepthook is threading.__excepthook__:
        threading.excepthook = _thread_excepthook


def _thread_excepthook(args: threading.ExceptHookArgs) -> None:
    """threading's own report of an error that ended a thread (``Exception in thread NAME:``
    and the traceback), its notes under the traceback (:func:`_thread_report`): before Python
    3.11 threading's prints none, and ``exceptiongroup``, which makes ``traceback`` print
    them, leaves threading's hook as it is, so they were said nowhere, the process going on.
    Nothing for a ``SystemExit``, as threading's own; threading's report where there is no
    report of ours or no ``sys.stderr`` (it writes to the one the thread started with)."""
    if isinstance(args.exc_value, SystemExit):  # threading's says nothing of one either
        return
    said, stderr = _thread_report(args), sys.stderr
    if said is None or stderr is None:
        threading.__excepthook__(args)
        return
    try:
        stderr.write(said)
        stderr.flush()
    except (OSError, ValueError):  # closed, or a broken pipe: nobody to tell
        pass


def _thread_report(args: threading.ExceptHookArgs) -> str | None:
    """threading's report of the error in ``args``, its notes under the traceback
    (:func:`format_exception`); None where there is no error, or where formatting it fails (a
    note that cannot be formatted): raised in the hook, that put ``Exception in
    threading.excepthook`` in the error's place, which was then said nowhere."""
    if args.exc_value is None:
        return None
    name = args.thread.name if args.thread is not None else threading.get_ident()
    try:
        return "".join([f"Exception in thread {name}:\n", *format_exception(args.exc_value)])
    except Exception:  # noqa: BLE001 - whatever it is, threading's own still reports the error
        return None


def _say_uncaught_notes() -> None:
    """At exit, before Python 3.11: the notes of the error the interpreter ended on
    (``sys.last_value``, set as it reported it, whichever hook printed it), under its traceback,
    as Python 3.11 prints them. None where nothing was uncaught or the session was
    interactive (its last error may be long past), or where a hook that prints notes did
    (:func:`_reports_print_notes`); nothing raised: stderr may be gone."""
    error = getattr(sys, "last_value", None)
    if error is None or _interactive() or _reports_print_notes():
        return
    try:
        sys.stderr.write("".join(_chain_notes(error)))
        sys.stderr.flush()
    except (OSError, ValueError):  # closed, or a broken pipe: nobody to tell
        pass
