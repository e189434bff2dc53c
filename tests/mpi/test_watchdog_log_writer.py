"""The watchdog's log writer: records written in order on its own thread, each naming the
thread and the function that said it, as a record logged in place would."""

from __future__ import annotations

import logging
import sys
import threading

import pytest

from distconv.sync.mpi.watchdog import LogWriter


class Kept(logging.Handler):
    """Keeps each record it is handed, with the thread that handed it."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: list[tuple[logging.LogRecord, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.kept.append((record, threading.current_thread().name))


@pytest.fixture
def logger():
    logger = logging.getLogger("tests.mpi.log_writer")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    handler = Kept()
    logger.addHandler(handler)
    yield logger, handler
    logger.removeHandler(handler)


def say_from_a_watching_thread(writer: LogWriter) -> None:
    writer.say(logging.WARNING, "rank %d: %s waited", 1, "Allreduce").wait(5)
    try:
        raise RuntimeError("a look failed")
    except RuntimeError:
        writer.say(logging.ERROR, "rank %d failed", 1, exc_info=sys.exc_info()).wait(5)


def said_from_a_watching_thread(logger: logging.Logger) -> None:
    """A writer for ``logger``, said to from a thread named as the watchdog's, then closed."""
    writer = LogWriter(logger, "log-writer")
    watching = threading.Thread(
        target=say_from_a_watching_thread, args=(writer,), name="distconv-watchdog"
    )
    watching.start()
    watching.join(10)
    writer.close()


@pytest.mark.timeout(30)
def test_records_name_who_said_them_and_are_written_by_the_writer_in_order(logger):
    logger, handler = logger
    said_from_a_watching_thread(logger)
    (warning, wrote_1), (error, wrote_2) = handler.kept
    assert (wrote_1, wrote_2) == ("log-writer", "log-writer")  # never the watching thread
    assert warning.getMessage() == "rank 1: Allreduce waited"
    assert (warning.threadName, warning.funcName) == (
        "distconv-watchdog",
        "say_from_a_watching_thread",
    )
    assert warning.pathname == __file__
    assert error.getMessage() == "rank 1 failed" and error.exc_info[0] is RuntimeError
    assert error.funcName == "say_from_a_watching_thread"


@pytest.mark.timeout(30)
def test_a_level_that_is_off_is_done_at_once_and_writes_nothing(logger):
    logger, handler = logger
    writer = LogWriter(logger, "log-writer")
    assert writer.say(logging.DEBUG, "not written").is_set()
    writer.say(logging.INFO, "written").wait(5)
    writer.close()
    assert [record.getMessage() for record, _ in handler.kept] == ["written"]


def logging_as_python_3_10_counts_frames() -> object:
    """``logging.currentframe`` as Python 3.10 defines it (``requires-python`` is >=3.10): a
    frame three up, counted from ``Logger._log``, where 3.11 counts from ``findCaller``."""
    return sys._getframe(3)


@pytest.mark.timeout(30)
def test_records_name_who_said_them_however_logging_counts_frames(logger, monkeypatch):
    """Logger.findCaller's frame counting is the interpreter's: ``findCaller(stacklevel=2)``
    called from ``say`` named the saying thread's caller's caller under Python 3.10
    (``threading.run``, in threading.py), so the record named where it came from on 3.11 only."""
    logger, handler = logger
    monkeypatch.setattr(logging, "currentframe", logging_as_python_3_10_counts_frames)
    said_from_a_watching_thread(logger)
    assert [(record.funcName, record.pathname) for record, _ in handler.kept] == [
        ("say_from_a_watching_thread", __file__)
    ] * 2
    assert handler.kept[0][0].lineno == say_from_a_watching_thread.__code__.co_firstlineno + 1


class FailingOnce(Kept):
    """Raises from ``emit`` on its first record (a collector gone), keeps the others."""

    failed = False

    def emit(self, record: logging.LogRecord) -> None:
        if not self.failed:
            self.failed = True
            raise OSError("the collector is gone")
        super().emit(record)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("raise_exceptions", [True, False])
def test_a_handler_that_raises_loses_that_record_only_and_is_named(
    logger, monkeypatch, capsys, raise_exceptions
):
    """The writer swallowed what a handler raised: the record was lost and nothing said so,
    where a handler of logging's own says its errors on stderr (``Handler.handleError``,
    unless ``logging.raiseExceptions`` is off). It says it the same way now, and goes on."""
    logger, handler = logger
    logger.removeHandler(handler)
    failing = FailingOnce()
    logger.addHandler(failing)
    monkeypatch.setattr(logging, "raiseExceptions", raise_exceptions)
    writer = LogWriter(logger, "log-writer")
    try:
        assert writer.say(logging.ERROR, "rank %d stopping", 1).wait(5)
        assert writer.say(logging.ERROR, "rank %d next", 1).wait(5)
    finally:
        writer.close()
        logger.removeHandler(failing)
    assert [record.getMessage() for record, _ in failing.kept] == ["rank 1 next"]
    said = capsys.readouterr().err
    if raise_exceptions:
        assert "--- Logging error" in said and "OSError: the collector is gone" in said, said
        assert "Message: 'rank %d stopping'" in said and "Arguments: (1,)" in said, said
    else:
        assert said == ""
