"""The line by which a rank that ends an MPI job says why, read back from ``mpiexec``'s output.

A rank that ends itself (``distconv.sync.mpi.leaving``: :func:`abort_job` before ``MPI_Abort``,
the watchdog's stop before the SIGKILL of itself) first writes one line,
``distconv.sync.mpi.leaving.reason``'s::

    rank 1: SyncError: stalled 30 s in allreduce; ending this rank
    rank 1: SyncError: step 3 differs; aborting the MPI job

(under ``--log-format json`` a JSON object of level ``error``, logger ``distconv``, whose
``message`` is that text). mpiexec's status then says only ``1`` or ``130`` (the Abort's) or
signal 9: :func:`rank_reason` finds that line in mpiexec's last lines, so that the failure
report names it as the cause (:func:`launcher.mpi_exit.said_by_rank`).

Only a line exactly as ``reason`` writes it counts, behind MPI's tag of the same rank (Hydra's
``-prepend-rank``: ``[1] ``, Open MPI's ``--tag-output``: ``[1,1]<stderr>:``, a space after
it from Open MPI 5): a rank's other
output, a line of mpiexec, or a line quoting another rank's, is not taken for it. A reason whose
error message spans lines is read under ``--log-format json`` (one JSON line holds it whole),
not in the text form: its last line has no ``rank N:``.

The wording is the sync's, in :mod:`distconv.rank_endings`, which both sides import (not
``distconv.sync.mpi``, which imports the MPI sync itself, which the launcher must not need).
``tests/launcher/test_rank_reason.py`` ties the two together through the sync's own functions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from distconv.rank_endings import REASON

from .json_lines import MPI_TAG

#: MPI's tag of a rank's line, as :mod:`launcher.json_lines` reads it
_TAG = re.compile(MPI_TAG)


def rank_reason(tail: Sequence[str]) -> tuple[int, str] | None:
    """The rank and its why (``SyncError: stalled 30 s in allreduce``) from the last line of
    ``tail`` (mpiexec's output) by which a rank said why it ends the job; None where none is."""
    for line in reversed(tail):
        said = _reason(line)
        if said is not None:
            return said
    return None


def _reason(line: str) -> tuple[int, str] | None:
    """The rank and its why where ``line`` is a rank's ``reason`` line behind its own tag."""
    tag, body = rank_text(line)
    if tag is None:
        return None
    found = REASON.fullmatch(body)
    if found is None or found[1] != tag[1]:  # another rank's line, quoted
        return None
    return int(found[1]), found[2]


def rank_text(line: str) -> tuple[re.Match[str] | None, str]:
    """``line`` as its rank wrote it: MPI's tag (None where it has none) taken off, and a JSON
    log's error line read for its ``message`` (``--log-format json``: the same text; whole, it
    ran on into the object's other fields)."""
    tag = _TAG.match(line)
    body = line[tag.end() :] if tag else line
    message = json_message(body) if body.startswith("{") else None
    return tag, body if message is None else message


def json_message(body: str) -> str | None:
    """The message of ``body`` where it is distconv's JSON error line (``--log-format json``:
    ``reason``'s, run_main's ``NAME: error: ...``, :func:`launcher.failure.Failure`'s read of
    a rank's last lines); else None."""
    try:
        entry = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than json parses
        return None
    if not isinstance(entry, dict) or entry.get("level") != "error":
        return None
    if entry.get("logger") != "distconv" or not isinstance(entry.get("message"), str):
        return None
    return entry["message"]
