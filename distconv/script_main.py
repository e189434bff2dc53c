"""How a user script ends: :func:`run_main` runs its ``main()`` and says a user's error in one
line, as ``distconv train`` does (``from distconv.distributed import run_main`` gives it too).

One line and exit 1, through the path ``distconv train`` ends by
(:func:`~distconv.user_errors.end_on_user_error`): the errors of
:data:`~distconv.user_errors.SCRIPT_ERROR_NAMES`, whose cause is the user's data, model or
configuration: bad data (``DataError``), a model that does not fit its inputs
(``LayerError``, ``NetworkError``), a checkpoint refused, a malformed environment
(:class:`~distconv.runtime.RuntimeConfigError`), an optimizer's name or hyperparameter
refused (:class:`~distconv.optim_base.OptimizerConfigError`: ``init("adam", lr=-1)``), ranks
that run different jobs or a shard that refused this job
(:class:`~distconv.sync.errors.JobRefused`). Another rank's failure exits 75
(a shard's refusal that tells of a rank that could not set up too, after its line:
:func:`~distconv.sync.peers.told_failure`), a stop 143 or 130. Any other exception propagates
with its traceback, a plain :class:`~distconv.sync.errors.SyncError` included (there it is
most often the sync API used out of order, ``start_step`` twice, a step after ``close()``),
and an ``OSError`` (most often the script's own file): the traceback shows where.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Mapping
from typing import TypeVar

from distconv import stop_request
from distconv.logs import as_log_line, error_line, interrupted_line, writes_json
from distconv.messages import debugging, say
from distconv.notes import format_exception, print_exception
from distconv.stop_request import Preempted
from distconv.sync.errors import JobRefused
from distconv.sync.mpi import leaving
from distconv.sync.mpi.leaving import (
    abort_through_open_hook,
    abort_uninitialised,
    is_abort_hook,
)
from distconv.sync.peers import PEER_FAILED_STATUS, peer_failure
from distconv.user_errors import SCRIPT_ERROR_NAMES, end_on_user_error, user_errors

_Result = TypeVar("_Result")

#: the format the last :func:`distconv.distributed.init` asked for (:func:`note_log_format`):
#: :func:`run_main`'s line for an error before it is set up heeds it
_log_format: str | None = None
#: the error the last :func:`run_main` ended on and kept as uncaught (:func:`_kept_as_uncaught`)
_kept: BaseException | None = None


def note_log_format(log_format: str | None) -> None:
    """Remember the log format a script's ``init`` asked for (``"text"``, ``"json"``, None),
    before anything there can fail: :func:`run_main`'s lines are JSON under a JSON log."""
    global _log_format
    _log_format = log_format


def run_main(main: Callable[[], _Result]) -> _Result:
    """Run a training script's ``main()`` and return what it returns (a ``main`` that returns
    an exit status keeps it: ``sys.exit(run_main(main))``), ending as ``distconv train`` does.

    Another rank's failure (:class:`~distconv.sync.peers.PeerFailed`, its traceback printed)
    exits 75 (``PEER_FAILED_STATUS``), not 1: ``distconv-launch`` reports the rank that failed.

    A stop by SIGTERM or Ctrl-C (the Trainer's :class:`~distconv.stop_request.Preempted`, after
    its checkpoint) ends it as ``distconv train``: one line and exit 143 or 130, not a traceback
    and 1 (a failure to a launcher); a sync ``main`` closes meanwhile leaves as after a finished
    run (under MPI it aborted). A Ctrl-C during setup, or a second one: ``interrupted`` and 130
    (then each line of its notes, and those of each Ctrl-C in its context chain, a second
    Ctrl-C's first: ``MPISync.fail_setup``'s names the error it cut short;
    ``DISTCONV_DEBUG=1`` prints the traceback); under an MPI sync's abort hook the hook's
    traceback, and the job aborted (another rank may wait for this one), and before
    ``MPI_Init`` the MPI job aborted too.

    A :class:`~distconv.runtime.RuntimeConfigError` (``RANK=x``) is ``script.py: error: ...``
    and exit 1 as well (its traceback under ``DISTCONV_DEBUG=1``, or an MPI sync's abort hook);
    a rank failing before it initialised MPI aborts the MPI job. So are the data and model
    errors ``distconv train`` says in one line (:data:`~distconv.user_errors.SCRIPT_ERROR_NAMES`:
    ``the training set's 'image' holds NaN or infinity in 1 row(s): row 5``); a rank whose MPI sync,
    closed in a ``finally`` as one propagates, aborts the job (another rank waits for it in a
    step) says it in its abort line alone, without the traceback, and so does MPISync's abort
    hook where the sync was left open (:func:`~distconv.sync.mpi.leaving.leave_to_hook`). So is a
    :class:`~distconv.sync.errors.JobRefused` (``rank 1 and rank 0 run different jobs: ...``,
    or a shard's refusal of this job), under MPI too: every rank raises a ``JobMismatch``
    alike, so each says its line and exits 1 (mpi4py's ``-m mpi4py`` runner may abort then),
    none left waiting, the sync closed in a ``finally`` or not; so does a 16-bit wire's
    ``WireRefused`` without the communication thread (with it, a plain ``SyncError`` that
    aborts the job: the thread skipped what it had queued); one not raised alike
    (``raised_alike``: a strategy's own) goes to an MPI sync's abort hook, as a
    RuntimeConfigError does (where a script's hook, set after ``init()``, took its place, it
    gets the error, then MPISync's aborts: the script's need not hand on to it). Lines are
    JSON under a JSON log (a peer failure's traceback under ``"exception"``). Any other
    exception propagates, a plain ``SyncError`` (most often the sync API used out of order)
    included; under a hook the script set after ``init()`` while an MPI sync's abort hook is
    open, the script's hook gets it, then MPISync's abort hook aborts the job."""
    ends_run, stop_request.preempted_ends_run = stop_request.preempted_ends_run, True
    # a rank that closes its MPI sync as such an error propagates aborts the job in one line,
    # as under distconv train, not after the traceback
    brief = leaving.BRIEF_ERRORS
    leaving.BRIEF_ERRORS = (*brief, *user_errors(names=SCRIPT_ERROR_NAMES))
    _forget_kept()
    try:
        return main()
    except Preempted as exc:
        from distconv.stop_kept import say_script_kept  # a stop's alone: run_dir and the rest

        say_script_kept(_program(), exc, _log_format)  # what it kept, the way on: lines before
        say(as_log_line(f"{_program()}: {exc}", logging.WARNING, _log_format))  # JSON as asked
        _unlink_after_stop(exc.exit_status)
        raise SystemExit(exc.exit_status) from None
    except KeyboardInterrupt as exc:  # before the Trainer takes Ctrl-C (setup), or a second
        if _hooked(exc):  # an MPI sync's abort hook: maybe this rank alone, the others waiting
            raise
        if debugging():
            print_exception(exc)
        say(interrupted_line(_program(), exc, _log_format))  # its notes: fail_setup's cut short
        _abort_mpi_before_init(130)  # the others wait in MPI_Init for this one
        raise SystemExit(130) from None
    except Exception as exc:
        status = _failure_status(exc)
        _abort_mpi_before_init(status)
        if status is None:
            raise
        _kept_as_uncaught(exc)
        raise SystemExit(status) from None
    finally:
        stop_request.preempted_ends_run = ends_run
        leaving.BRIEF_ERRORS = brief


def _failure_status(error: Exception) -> int | None:
    """Say why ``error`` ends the script and return its exit status, as ``distconv train``
    does: :data:`~distconv.sync.peers.PEER_FAILED_STATUS` for another rank's failure (with
    the traceback), 1 for a malformed environment or a job refused (one line; 75 where the
    refusal tells of another rank's failure: :func:`~distconv.sync.peers.told_failure`); None for
    anything else (a bug's traceback, which propagates), for anything under
    ``DISTCONV_DEBUG=1``, and for an error an exception hook takes."""
    if peer_failure(error) is not None:
        if writes_json(_log_format):  # the traceback in the line: every line JSON there
            trace = "".join(format_exception(error)).rstrip()
            ending = error_line(_program(), error, _log_format, exception=trace)
            # its notes are in the traceback, as the text form's: not again on lines before it
            say(ending.rpartition("\n")[2])
        else:
            print_exception(error)
        return PEER_FAILED_STATUS
    # said here under an MPI sync's abort hook too where every rank raises it alike (MPI's
    # refusals): none waits; any other error of this rank's goes to the hook (_hooked)
    alike = isinstance(error, JobRefused) and error.raised_alike
    if not alike and is_abort_hook(sys.excepthook):  # the hook first: it must abort, and
        leaving.leave_to_hook(error)  # say a data error in one line, as a closed sync's abort
        return None
    if not alike and abort_through_open_hook(error):  # a script's hook over ours: _hooked
        return None
    if isinstance(error, user_errors(loaded_only=True, names=SCRIPT_ERROR_NAMES)):
        return end_on_user_error(_program(), error, _log_format)  # None: debugging, status 1
    return None


def _kept_as_uncaught(error: BaseException) -> None:
    """Keep ``error``, said and ended on here, as the interpreter keeps an uncaught error it
    printed. Ended by a ``SystemExit``, it was none: a parameter-server worker dropped without
    ``close()`` said a plain bye at the exit
    (:func:`~distconv.sync.ps.worker_sockets.uncaught_error`, which reads ``sys.last_exc``
    first), so its shard told the ranks waiting in the step that this rank had closed, blaming
    none, and the launcher named whichever rank exited first.

    Before Python 3.12 ``sys.last_exc`` alone: ``sys.last_value`` there is what the exit of
    :mod:`distconv.notes` reads to say an uncaught error's notes, which here were said already
    (a peer failure's traceback) or are not part of the one line (a JSON log's too)."""
    global _kept
    if sys.version_info >= (3, 12):  # the interpreter sets all four together
        sys.last_type, sys.last_value, sys.last_traceback = type(error), error, error.__traceback__
    sys.last_exc = _kept = error


def _forget_kept() -> None:
    """Drop the error an earlier :func:`run_main` of this process kept (caught ``SystemExit``:
    a test's, a loop of runs), where nothing took its place: its traceback held that run's
    network and dropped worker alive, still beating, while the next one ran."""
    global _kept
    if _kept is not None and getattr(sys, "last_exc", None) is _kept:
        ours = getattr(sys, "last_value", None) is _kept  # Python 3.12's four, set together
        for name in ("last_exc", "last_type", "last_value", "last_traceback")[: 4 if ours else 1]:
            with contextlib.suppress(AttributeError):
                delattr(sys, name)
    _kept = None


def _hooked(error: BaseException) -> bool:
    """Whether an MPI sync's abort hook is open, which must abort every rank on ``error``
    (this rank's alone, maybe, the others waiting for it), where a SystemExit left them
    waiting. Installed (:func:`~distconv.sync.mpi.leaving.is_abort_hook`), the error is left
    uncaught for it. Under a hook a script set after ``init()``, which need not hand on to ours
    (one that calls Python's own, or ``sys.__excepthook__`` put back), the error goes to the
    script's hook (a logger's sees it), then the open hook aborts the job
    (:func:`~distconv.sync.mpi.leaving.abort_through_open_hook`, which returns only with a
    test's stand-in ``Abort``). With none open, a
    script's own hook (a logger's) is no abort hook: a refusal is said in one line, a Ctrl-C
    ``interrupted`` and 130."""
    return is_abort_hook(sys.excepthook) or abort_through_open_hook(error)


def _abort_mpi_before_init(status: int | None) -> None:
    """Abort the MPI job from a rank failing before ``MPI_Init``, as ``distconv train`` does:
    Hydra left the others waiting there for ever (after a pserver's peer failure none wait)."""
    mpi_job = mpi_launcher_size() > 1 and not os.environ.get("DISTCONV_PSERVERS")
    if mpi_job and status != PEER_FAILED_STATUS:
        if status is None and "mpi4py.MPI" not in sys.modules and sys.exc_info()[1]:
            print_exception(sys.exc_info()[1])  # a bug's, before the abort ends this process
        abort_uninitialised(status or 1)  # returns where MPI is initialised already


def _unlink_after_stop(status: int) -> None:
    """Unlink the node's MPI shared-memory file from a rank of an MPI job stopped (a
    ``Preempted``, ``status`` its exit), as its errors do: mpi4py's abort follows, which skips
    the unlink. A rank that never initialised MPI (a LocalSync's, or a parameter server's,
    under ``mpiexec``) ends as it is: initialising MPI to abort waited for peers that never
    will, then SIGALRM ended it a minute later (exit 14, where a stop says 143 at once)."""
    if "mpi4py.MPI" in sys.modules:
        _abort_mpi_before_init(status)


def _program() -> str:
    """The script's name, as its stop line starts (``distconv train`` says its own)."""
    return os.path.basename(sys.argv[0]) or "python"


def mpi_launcher_size(environ: Mapping[str, str] | None = None) -> int:
    """The world size an MPI launcher (MPICH's or Open MPI's) gave this process, read from its
    size variable alone (as :mod:`distconv.runtime` reads them); 1 where there is none or it is
    not a number. Never raises: it is read on the way out of a process that has already failed."""
    env = os.environ if environ is None else environ
    for size_var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        if size_var in env:
            try:
                return int(env[size_var].strip())
            except ValueError:
                return 1
    return 1
