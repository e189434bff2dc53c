"""The launcher's output as one JSON object per line, under ``distconv train --log-format json``.

A collector that parses the launcher's merged output as JSON met ``[worker 1] {...}`` (the
child's prefix in front of its JSON line), a shard's text lines, and the launcher's own
``distconv-launch: ...`` messages. Under JSON the launcher writes instead:

- a child's line that is a JSON object as it is (it names its role and rank itself);
- any other line of a child (a shard's log, a traceback, MPI's banner) as an object with the
  fields of ``distconv.logs``' JSON lines: the line as ``message``, the child's ``role`` and
  ``rank`` (under ``mpiexec``, the rank MPI put in front of it: ``[1] `` or ``[1,1]<stdout>:``;
  a line without one is mpiexec's own, ``role`` ``mpiexec``), the job's ``job_id`` and the
  attempt's ``restart``;
- its own messages as an object whose ``role`` is ``launcher`` and ``logger``
  ``distconv.launch`` (the failure report's level is ``error``, its tail within ``message``);
  the run directory's paths that the job's start line, the failure report and the restarts'
  lines name, which their ``message`` shows quoted as the text form does (``'path'``, or the
  shell's ``$'...'`` word), are keys of their own too, each a JSON string, unquoted
  (:data:`PATH_FIELDS`), so a collector need not undo the shell's quoting.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from distconv.logs import NOTE_KEY, NOTE_LEVEL, json_entry

from .stderr_line import write_last

#: the tag MPI puts before a rank's line, its rank the group: Hydra's ``-prepend-rank``
#: (``[1] ``), Open MPI's ``--tag-output`` (4: ``[1,1]<stderr>:``; 5, PMIx's: a space after it)
MPI_TAG = r"\[(?:\d+,)?(\d+)\](?:<std(?:out|err)>: ?|\s)"
_MPI_TAG = re.compile(MPI_TAG.encode())

#: the keys a launcher's JSON line gives the paths its message names, each with what it is
PATH_FIELDS = {
    "logs": "the run directory's logs folder (the job's start line, under local)",
    "keys": "the job's CURVE keys folder, where a launch reuses it",
    "log": "the failed child's log, whose last lines the failure report quotes",
    "report": "failure.json, where the failure report was written",
    "restarts": "restarts.jsonl, what each restart recovered from",
}


def _is_json_object(text: bytes) -> bool:
    if not text.lstrip().startswith(b"{"):
        return False
    try:
        return isinstance(json.loads(text), dict)
    except (ValueError, RecursionError):  # UnicodeDecodeError too; nested past json's depth
        return False


@dataclass(frozen=True)
class JsonLines:
    """Renders the launcher's lines as JSON objects for one job.

    Attributes:
        job_id: the job's id, in every object the launcher writes (None before it is known).
    """

    job_id: str | None

    def entry(
        self,
        message: str,
        role: str | None,
        rank: int | None,
        restart: int | None,
        level: str = "info",
        fields: Mapping[str, str | bool] | None = None,
    ) -> bytes:
        """One JSON line (newline included) with ``distconv.logs``' fields, then ``fields``
        (none of which replaces one of those)."""
        entry = json_entry(
            message,
            created=time.time(),
            level=level,
            logger="distconv.launch",
            role=role,
            rank=rank,
            world_size=None,
            job_id=self.job_id,
            restart=restart,
        )
        for key, value in (fields or {}).items():
            entry.setdefault(key, value)
        return json.dumps(entry, separators=(",", ":")).encode() + b"\n"

    def child_line(self, role: str, rank: int, restart: int, line: bytes) -> bytes:
        """A child's output line (ending in a newline) as a JSON line: unchanged where it is
        a JSON object, else wrapped; under ``mpiexec`` (``role``), MPI's rank tag is read."""
        body = line.rstrip(b"\n")
        who: int | None = rank
        if role == "mpiexec":
            tag = _MPI_TAG.match(body)
            if tag is not None:
                role, who, body = "worker", int(tag.group(1)), body[tag.end() :]
            else:
                who = None  # mpiexec's own line (its banner on a failed rank)
        if _is_json_object(body):
            return body + b"\n"
        return self.entry(body.decode(errors="replace"), role, who, restart)

    def note(self, text: str) -> bytes:
        """A line of the notes of the error the launcher ends on, as a JSON line marked as
        ``distconv.logs``' note lines are (:func:`distconv.logs.note_line`): not a second
        ``error`` object before the error's own."""
        level = logging.getLevelName(NOTE_LEVEL).lower()
        return self.entry(text, "launcher", None, None, level, {NOTE_KEY: True})

    def message(
        self,
        text: str,
        restart: int | None,
        level: str = "info",
        paths: Mapping[str, str | os.PathLike[str]] | None = None,
    ) -> bytes:
        """One of the launcher's own messages as a JSON line; ``paths``: those it names, each
        a key of its own (:data:`PATH_FIELDS`), unquoted, but for one that is no UTF-8 (a byte
        of none in a name, which Python holds as a lone surrogate): JSON writes that
        ``"\\udcff"``, which a strict parser refuses, the whole line, and another reads as
        U+FFFD, another path. Its ``$'...'`` word in ``text`` is then the only form of it."""
        fields = {key: os.fspath(path) for key, path in (paths or {}).items()}
        fields = {key: path for key, path in fields.items() if _is_utf8(path)}
        return self.entry(text, "launcher", None, restart, level, fields)


def _is_utf8(text: str) -> bool:
    """Whether ``text`` is text UTF-8 writes: no lone surrogate in it."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def asks_json(rest: Sequence[str]) -> bool:
    """Whether the arguments after ``--`` are ``distconv train``'s and ask for
    ``--log-format json`` (spelled out as ``distconv train`` reads them: ``--log-f json``),
    beside a flag it does not take too (whose refusal is then a JSON line)."""
    from .commands import names_a_program, option_value

    if names_a_program(rest):
        return False
    from distconv.train_args import FlagError, spelled_out

    spelled = []
    for token in rest[1:] if rest and rest[0] == "train" else rest:
        try:
            spelled += spelled_out([token])
        except FlagError:  # refused later, with its reason: that line is JSON too if asked
            spelled.append(token)
    return option_value(spelled, "--log-format") == "json"


def json_lines(rest: Sequence[str], job_id: str | None) -> JsonLines | None:
    """The :class:`JsonLines` of a job whose train arguments (``rest``) ask for JSON, else
    None."""
    return JsonLines(job_id) if asks_json(rest) else None


def last_line(
    text: str, rest: Sequence[str], before: Sequence[str] = (), level: str = "error"
) -> None:
    """The launcher's last line on stderr, before any job ran (a refusal, a Ctrl-C), after the
    lines ``before`` it (the notes of the error it ends on:
    :func:`distconv.messages.note_lines`): each a JSON object where the train arguments after
    ``--`` (``rest``) ask for JSON, the last one's ``level`` (``info`` for a stop asked
    for), each note's
    :meth:`JsonLines.note`'s; written at once, given up after a bound on
    a stderr that stalls (:func:`launcher.stderr_line.write_last`)."""
    lines = json_lines(rest, None)
    if lines is None:
        said = [*before, text]
    else:
        objects = [*(lines.note(line) for line in before), lines.message(text, None, level)]
        said = [line.decode().rstrip("\n") for line in objects]
    write_last("\n".join(said))
