"""Log lines that say who wrote them: rank-stamped text, or one JSON object per line.

:func:`configure_logging` routes every record through one handler whose filter stamps it with
this process's :class:`~distconv.runtime.Runtime` (and the launcher's restart count), so a
multi-rank run's lines read ``12:00:01 [2/4] message`` and ``--log-format json`` lines carry
role, rank, world size and job id.

Example::

    runtime = detect_runtime({"rank": args.rank, "world_size": args.world_size})
    configure_logging(runtime, fmt=args.log_format)
    log.info("started")          # "12:00:01 [2/4] started"
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from collections.abc import Mapping
from typing import Any

from distconv import strict_json
from distconv.launch_env import restart_count
from distconv.messages import exception_line, named, note_lines
from distconv.notes import notes_of
from distconv.rank_endings import begins_as_job_error, ending_name
from distconv.runtime import Runtime, RuntimeConfigError


class _RuntimeFilter(logging.Filter):
    """Stamps every record with the runtime's fields so any formatter can use them."""

    def __init__(self, runtime: Runtime, restart: int) -> None:
        super().__init__()
        self.runtime = runtime
        self.restart = restart

    def filter(self, record: logging.LogRecord) -> bool:
        record.rank_prefix = self.runtime.log_prefix + " " if self.runtime.log_prefix else ""
        record.runtime = self.runtime
        record.restart = self.restart
        return True


def json_entry(
    message: str,
    *,
    created: float,
    level: str,
    logger: str,
    role: str | None,
    rank: int | None,
    world_size: int | None,
    job_id: str | None,
    restart: int | None,
) -> dict[str, Any]:
    """The fields of one ``--log-format json`` line, in their order: the log's own lines and
    the launcher's (:mod:`launcher.json_lines`) read alike. ``created``: a ``time.time()``,
    written in UTC with milliseconds."""
    return {
        "time": datetime.datetime.fromtimestamp(created, datetime.timezone.utc)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z"),
        "level": level,
        "message": message,
        "logger": logger,
        "role": role,
        "rank": rank,
        "world_size": world_size,
        "job_id": job_id,
        "restart": restart,
    }


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, message and who logged it (``--log-format json``)."""

    def format(self, record: logging.LogRecord) -> str:
        runtime: Runtime = getattr(record, "runtime", Runtime())
        entry = json_entry(
            record.getMessage(),
            created=record.created,
            level=record.levelname.lower(),
            logger=record.name,
            role=runtime.role,
            rank=runtime.rank,
            world_size=runtime.world_size,
            job_id=runtime.job_id,
            restart=getattr(record, "restart", 0),
        )
        for key, value in getattr(record, "fields", {}).items():
            entry.setdefault(key, value)  # a result's numbers, as keys of their own
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:  # stack_info=True: the text line carries it too
            entry["stack"] = self.formatStack(record.stack_info)
        return strict_json.dumps(entry, separators=(",", ":"))  # a NaN result: null


_TEXT_FORMAT = "%(asctime)s %(rank_prefix)s%(message)s"
_HANDLER_NAME = "distconv.runtime"


def configure_logging(
    runtime: Runtime,
    level: int = logging.INFO,
    fmt: str = "text",
    stream: Any = None,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Route every log record through one handler that carries this process's rank.

    Replaces the root logger's handlers, so calling it again (say after the runtime is known
    better) does not duplicate lines.

    Args:
        runtime: whose lines these are.
        level: the root logger's level.
        fmt: ``"text"`` (``"12:00:01 [2/4] message"``) or ``"json"`` (one object per line with
            time, level, message, role, rank, world_size, job_id and restart; Python's
            warnings too, logged by ``py.warnings``).
        stream: where lines go (default ``sys.stderr``).
        environ: read for ``DISTCONV_RESTART``, the launcher's restart count (default
            ``os.environ``).

    Raises:
        RuntimeConfigError: ``fmt`` is not one of the two, or ``DISTCONV_RESTART`` is not an
            integer.
    """
    if fmt not in ("text", "json"):
        raise RuntimeConfigError(f"log format must be 'text' or 'json', got {fmt!r}")
    restart = restart_count(environ)
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.set_name(_HANDLER_NAME)
    handler.addFilter(_RuntimeFilter(runtime, restart))
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(_TEXT_FORMAT, datefmt="%H:%M:%S"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # Python's warnings (numpy's overflow in a diverging run) went to stderr as two raw lines
    # each, which a collector parsing JSON refuses: as JSON, they go through the log. As text,
    # their capture stays as it was: turned off, a script's own (distributed.setup) was lost
    if fmt == "json":
        logging.captureWarnings(True)


def as_log_line(
    message: str, level: int = logging.INFO, fmt: str | None = None, **fields: Any
) -> str:
    """``message`` as the log writes its lines, for one that goes around the log: the closing
    result on stdout, the error that ends the process on stderr.

    Under ``--log-format json`` that is a JSON object like every other line (``fields`` as keys
    of their own), so a collector that parses a pod's merged output parses these too; otherwise
    it is ``message`` unchanged, without the log's time stamp. ``fmt``: the format asked for,
    for a line written before :func:`configure_logging` ran (a flag it never got to): JSON then
    too, its runtime's fields null, as no rank is known yet.
    """
    if not writes_json(fmt):
        return message
    handler = _handler()
    record = logging.LogRecord("distconv", level, __file__, 0, message, None, None)
    record.fields = fields
    if handler is None:
        unknown = dict.fromkeys(("role", "rank", "world_size", "job_id", "restart"))
        return strict_json.dumps(
            {**json.loads(JsonFormatter().format(record)), **unknown}, separators=(",", ":")
        )
    handler.filter(record)  # stamps the runtime and the restart
    return handler.format(record)


def writes_json(fmt: str | None = None) -> bool:
    """Whether :func:`as_log_line` writes JSON: the log's handler does, or, before
    :func:`configure_logging` ran, ``fmt`` (the format asked for) is ``"json"``."""
    handler = _handler()
    return fmt == "json" if handler is None else isinstance(handler.formatter, JsonFormatter)


def _handler() -> logging.Handler | None:
    """The handler :func:`configure_logging` put in place, or None before it ran."""
    return next((h for h in logging.getLogger().handlers if h.get_name() == _HANDLER_NAME), None)


def error_line(program: str, error: BaseException, fmt: str | None = None, **fields: Any) -> str:
    """The last line of a process that an error the user can act on ended:
    ``PROGRAM: error: message`` on one line, as :func:`as_log_line` writes it (``fields``:
    keys of its own under JSON); ``PROGRAM: error: DataError: message`` for an error of the job
    itself, which the launcher does not restart (:func:`~distconv.rank_endings.named_in_ending`;
    a script's subclass of one by the name of distconv's class it derives from); and another
    error's class before a message that begins as such an error's would. Before it, the lines
    of the notes ``error`` carries (:func:`noted_line`)."""
    name = ending_name(error)
    said = exception_line(error)
    if name is not None:
        said = name + named(error).removeprefix(type(error).__name__)
    elif begins_as_job_error(said):  # a quote of one, said as it: the launcher would stop
        said = named(error)
    return noted_line(program, error, f"{program}: error: {said}", fmt, **fields)


def noted_line(
    who: str, error: BaseException, line: str, fmt: str | None = None, **fields: Any
) -> str:
    """``line``, the one-line error that ends a process, as :func:`as_log_line` writes it at
    level ``error`` (``fields``: keys of its own under JSON), after a line for each line of the
    notes ``error`` carries (PEP 678), ``WHO: note: ...``
    (:func:`~distconv.messages.note_lines`; :func:`note_line`): the note is often the way out
    (``raise --timeout``), which the one line dropped. ``line`` stays the last: the launcher
    reads it. Under JSON, one object a line, each note's a :func:`note_line`. No newline after
    the last."""
    said = [note_line(note, fmt) for note in note_lines(who, error)]
    return "\n".join([*said, as_log_line(line, logging.ERROR, fmt, **fields)])


#: the level of a note's line before the error it belongs to: ``info``, not ``error``, so that
#: the error's own line stays the one ``"level": "error"`` object of a failure (a collector that
#: alerts on, or takes the cause from, the first error object of a pod met the note there)
NOTE_LEVEL = logging.INFO
#: the key that marks a note's JSON object (``"note": true``), beside its level
NOTE_KEY = "note"


def note_line(line: str, fmt: str | None = None) -> str:
    """``line``, one line of the notes an error carries (``WHO: note: ...``), as
    :func:`as_log_line` writes it: under JSON an object at :data:`NOTE_LEVEL` with
    ``"note": true`` (:data:`NOTE_KEY`), which a collector tells from the error it belongs to,
    the next ``"level": "error"`` object; as text, ``line`` unchanged."""
    return as_log_line(line, NOTE_LEVEL, fmt, **{NOTE_KEY: True})


def interrupted_line(program: str, interrupt: BaseException, fmt: str | None = None) -> str:
    """The last lines of a process that a Ctrl-C (``interrupt``) ended: ``PROGRAM:
    interrupted``, then each line of the notes it carries (PEP 678: ``MPISync.fail_setup``'s
    names the error the Ctrl-C cut short, and whether the other ranks were told, which the
    interrupt line alone never said), each ``PROGRAM: note`` as :func:`as_log_line` writes
    it (one JSON object a line under JSON, a note's marked ``"note": true``, :data:`NOTE_KEY`,
    as :func:`note_line` marks an error's; all at level ``warning``, the interrupt's own).

    So too the notes of each KeyboardInterrupt in its ``__context__`` chain, after its own:
    a second Ctrl-C, raised as the noted first propagated, ended the run with that one as its
    context only, and the note was said nowhere. Each interrupt's notes are read once, and a
    note said once (a chain that loops, or a note added to two interrupts). The chain is read
    up to an interrupt whose notes were settled (:func:`settle_notes`): a later Ctrl-C, raised
    in a handler that set up again, cut short no failure they name."""
    said: list[str] = []
    for each in _interrupts(interrupt):
        said += [note for note in notes_of(each) if note not in said]
    noted = [line for note in said for line in note.splitlines()]
    ending = [as_log_line(f"{program}: interrupted", logging.WARNING, fmt)]
    marked = {NOTE_KEY: True}
    ending += [as_log_line(f"{program}: {line}", logging.WARNING, fmt, **marked) for line in noted]
    return "\n".join(ending)


#: the attribute :func:`settle_notes` sets (an exception takes no weak reference, so it is
#: marked itself, not held in a set)
_SETTLED = "_distconv_notes_settled"


def settle_notes(interrupt: BaseException) -> None:
    """Mark ``interrupt``'s notes as settled: what they say no longer holds for a later Ctrl-C
    raised while it is handled, which keeps it as its ``__context__`` (MPISync's setup made
    again after ``fail_setup``'s noted Ctrl-C, in the handler that caught it: a later Ctrl-C
    there cut short no failure to set up). :func:`interrupted_line` says no notes of it, nor of
    the interrupts before it in the chain; its own traceback still shows them."""
    setattr(interrupt, _SETTLED, True)


#: how far :func:`interrupted_line` follows a context chain: its length is the script's to
#: make (an error raised in each of many nested handlers), and the process's last lines are not
_CHAIN_LIMIT = 64


def _interrupts(interrupt: BaseException) -> list[BaseException]:
    """``interrupt``, then each KeyboardInterrupt in its ``__context__`` chain, in its order,
    each once (a chain made to loop, ``a.__context__ = b`` after ``b``'s was ``a``: Python
    breaks only the loops that raising makes), up to :data:`_CHAIN_LIMIT` links, and to the
    first whose notes were settled (:func:`settle_notes`), which ends it: older still."""
    found: list[BaseException] = [interrupt]
    seen = {id(interrupt)}
    link = interrupt.__context__
    for _ in range(_CHAIN_LIMIT):
        if link is None or id(link) in seen or getattr(link, _SETTLED, False):
            break
        seen.add(id(link))
        if isinstance(link, KeyboardInterrupt):
            found.append(link)
        link = link.__context__
    return found
