"""The notes a script's own exception hook leaves out of its report of the error a rank aborts
on (a logger's, Python 3.10's ``traceback`` printing none), which the MPI sync's abort hook
writes after it: under ``--log-format json`` each is a JSON object, as the logger's report is.
Raw, it was the one line of the log a collector could not parse. Driven in process, as on 3.10;
``tests/mpi/test_noted_abort.py`` aborts a real job so, under the Python that runs it."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from distconv import notes
from distconv.logs import configure_logging
from distconv.notes import add_note
from distconv.runtime import Runtime
from distconv.sync.mpi import leaving
from distconv.sync.mpi.leaving import install_abort_hook
from tests.mpi.common import AbortRecorder

NOTE = "the way out: raise --timeout if the shard is only slow"


@pytest.fixture()
def as_on_3_10(monkeypatch):
    """As on Python 3.10 (``traceback`` prints no notes); the root logger's handlers, which
    the test's ``--log-format json`` log replaces, put back after. The stand-in Abort returns:
    the process is not ended, nor held for a launcher to forward its lines."""
    monkeypatch.setattr(notes, "_traceback_prints_notes", lambda: False)
    monkeypatch.setattr(leaving, "_exit", lambda status: None)
    monkeypatch.setattr(leaving, "FORWARD_SECONDS", 0.0)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    logging.captureWarnings(False)
    for handler in root.handlers[:]:
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def _log_uncaught(etype: type[BaseException], value: BaseException, tb: object) -> None:
    """A script's own exception hook: the error logged, traceback and all."""
    logging.getLogger("script").error("uncaught", exc_info=(etype, value, tb))


def test_the_note_after_a_loggers_report_is_a_json_object(as_on_3_10, capsys, monkeypatch):
    configure_logging(Runtime(), fmt="json", environ={})  # on the stderr captured now
    monkeypatch.setattr(sys, "excepthook", _log_uncaught)  # the script's, set before the sync's
    comm = AbortRecorder()
    restore = install_abort_hook(comm)
    try:
        try:
            error = RuntimeError("rank 1 fails on purpose")
            add_note(error, NOTE)
            raise error
        except RuntimeError:
            sys.excepthook(*sys.exc_info())
    finally:
        restore()
    assert comm.aborted == [1]
    said = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(s["logger"], s["message"]) for s in said] == [
        ("script", "uncaught"),
        ("distconv", NOTE),
    ]
