"""mpiexec -n 2 python run_noted_abort.py HOW: rank 1 ends the job on an error that carries a
note, after handling another noted error and going on (a fit tried again); rank 0 waits in a
barrier until the abort ends it.

It imports nothing of the tests (``common`` imports pytest, and with it ``exceptiongroup``,
whose hook prints notes before Python 3.11 where a rank of a user's job prints none).

HOW says how the error leaves rank 1:

- ``closed``: the sync closed in a ``finally`` aborts the job (``abort_job``: the traceback);
- ``uncaught``: the sync left open, its exception hook aborts the job (the traceback);
- ``logged``: as ``uncaught``, under an exception hook of the script's own, set before the
  sync's, which logs the error (``logging``'s traceback, which prints no notes before 3.11);
- ``logged_json``: as ``logged``, under ``--log-format json``'s log (a JSON object a line);
- ``brief``: a refused checkpoint under ``script_flags.refusals``, the sync closed in a
  ``finally``: the abort line alone, as ``distconv train`` says an error a user can act on.
"""

from __future__ import annotations

import argparse
import logging
import sys

import numpy as np

from distconv.checkpoint_errors import CheckpointError
from distconv.logs import configure_logging
from distconv.notes import add_note
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.runtime import Runtime
from distconv.script_flags import refusals
from distconv.sync.mpi import MPISync

#: the note of the error handled on rank 1, which nobody must be told of
HANDLED_NOTE = "the handled error's note"
#: the note of the error that ends the job, which the user must see
ENDING_NOTE = "the way out: raise --timeout if the shard is only slow"


def handled_then_raised(error: Exception) -> None:
    """Handle one noted error, as a fit tried again does, then raise ``error`` with a note."""
    try:
        retried = ValueError("the first try")
        add_note(retried, HANDLED_NOTE)
        raise retried
    except ValueError:
        pass
    add_note(error, ENDING_NOTE)
    raise error


def log_uncaught(etype: type[BaseException], value: BaseException, tb: object) -> None:
    """A script's own exception hook: the error logged, traceback and all."""
    logging.getLogger("script").error("uncaught", exc_info=(etype, value, tb))


def main() -> None:
    how = sys.argv[1]
    if how == "logged_json":
        configure_logging(Runtime(), fmt="json")
    if how in ("logged", "logged_json"):
        sys.excepthook = log_uncaught
    sync = MPISync(create_optimizer("sgd"))
    sync.setup([Parameter("w", np.zeros(3))], {})
    if sync.rank == 0:
        sync.comm.Barrier()  # until rank 1's abort ends the job
        return
    if how in ("uncaught", "logged", "logged_json"):
        handled_then_raised(RuntimeError("rank 1 fails on purpose"))
    try:
        if how == "brief":
            with refusals(argparse.ArgumentParser(prog="run_noted_abort")):
                try:
                    handled_then_raised(CheckpointError("no checkpoint in runs/x"))
                finally:
                    sync.close()
        handled_then_raised(RuntimeError("rank 1 fails on purpose"))
    finally:
        sync.close()


if __name__ == "__main__":
    main()
