"""The errors whose cause the user can act on (bad data, a corrupt checkpoint, a model that does
not fit its inputs, a bad option or optimizer hyperparameter), and how a process ends on one:
one line naming the cause and exit 1, or 75 where it only tells of another rank's failure;
``DISTCONV_DEBUG=1`` shows the traceback instead. ``distconv train`` (:mod:`distconv.cli`) and
a script's
:func:`~distconv.script_main.run_main` end alike through :func:`end_on_user_error`, a script on
:data:`SCRIPT_ERROR_NAMES`.

Names, not classes: importing the classes would load numpy, the trainer and the MPI sync at
every start of every command.
"""

from __future__ import annotations

import importlib
import sys
import traceback

from distconv.logs import error_line
from distconv.messages import debugging, say

#: failures with a cause the user can act on, by (module, name) where the class is defined;
#: anything else is a bug and keeps its traceback
USER_ERROR_NAMES = (
    ("distconv.data", "DataError"),
    ("distconv.checkpoint", "CheckpointError"),
    ("distconv.backend", "BackendError"),
    ("distconv.network", "NetworkError"),
    ("distconv.placement", "RuntimeConfigError"),
    ("distconv.optim_base", "OptimizerConfigError"),
    ("distconv.sync.errors", "SyncError"),
    ("distconv.sync.ps.cli", "PserverStartError"),
    ("distconv.step_guard", "TrainingError"),
    ("distconv.metrics", "MetricsError"),
    ("distconv.layers.errors", "LayerError"),
    ("builtins", "OSError"),
)

#: those a script run through :func:`~distconv.script_main.run_main` ends on in one line as
#: well: all of :data:`USER_ERROR_NAMES` but a ``SyncError`` that is no ``JobRefused`` (most
#: often the sync API called out of order) and an ``OSError`` (most often the script's own
#: file), whose traceback shows the script's line that did it
SCRIPT_ERROR_NAMES = (
    *(n for n in USER_ERROR_NAMES if n[1] not in ("SyncError", "OSError")),
    ("distconv.sync.errors", "JobRefused"),
)


def user_errors(
    loaded_only: bool = False, names: tuple[tuple[str, str], ...] = USER_ERROR_NAMES
) -> tuple[type[BaseException], ...]:
    """The exception classes ``names`` name (by default :data:`USER_ERROR_NAMES`).

    With ``loaded_only``, those of modules already imported, and nothing is imported: an
    exception can be an instance of a class only where the class's module has been loaded, so
    that tuple classifies any exception raised so far as the whole one does.
    """
    if not loaded_only:
        for module, _ in names:
            importlib.import_module(module)
    # a module another thread is importing is in sys.modules before its class is defined:
    # nothing raised so far can be an instance of that class
    classes = (getattr(sys.modules.get(module), name, None) for module, name in names)
    return tuple(cls for cls in classes if cls is not None)


def end_on_user_error(
    program: str, error: BaseException, log_format: str | None, rank: int | None = None
) -> int | None:
    """End on ``error``, one of the user's: say ``PROGRAM: error: message`` in one line (JSON
    under a JSON ``log_format``) and return the exit status, 75
    (:data:`~distconv.sync.peers.PEER_FAILED_STATUS`) where ``error`` only tells of another
    rank's failure (a :class:`~distconv.sync.peers.PeerFailed`, or a shard's word that a rank
    other than ``rank`` could not set up: :func:`~distconv.sync.peers.told_failure`), else 1.

    Under ``DISTCONV_DEBUG=1`` the traceback in the line's place: printed here where the
    status is 75, left to the caller where it is 1 (None: raise ``error`` again, and Python
    prints it and exits 1)."""
    from distconv.sync.peers import PEER_FAILED_STATUS, peer_failure, told_failure

    told = told_failure(error, rank)
    status = PEER_FAILED_STATUS if peer_failure(error) or told else 1
    if debugging():
        if status == 1:
            return None
        traceback.print_exception(error)  # and still the status that says "a peer"
        return status
    say(error_line(program, error, log_format))
    return status
