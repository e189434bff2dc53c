"""The statement a line of source belongs to: how a failing instruction's source is read
where Python keeps no columns for it (Python 3.10; 3.11+ run with ``-X no_debug_ranges``).

A traceback names the line it failed at; the file is parsed once, and the line is taken for
the one simple statement (an assignment, an augmented assignment, an expression, a return)
whose lines hold it. That is the instruction's own statement in code written one statement
to a line, which is what the checks reading it are written for. A line that is not one
statement's alone (``a = b; c += d``, a compound statement's header, ``if x: y += 1``)
is unread: the checks then blame nothing, and the layer's own error stands.
"""

from __future__ import annotations

import ast
import linecache
import threading
from bisect import bisect_right
from collections import OrderedDict
from typing import Any, NamedTuple

#: how many files' statements are kept parsed: those that raised the errors read lately
_FILES_KEPT = 32
#: the longest source parsed whole, in characters: a generated module of megabytes on the
#: failing path took seconds and a gigabyte to parse where the error was read
_MOST_SOURCE = 1 << 20


class _Lines(NamedTuple):
    """The lines ``first..last`` of one statement, and its columns ``start`` (of ``first``)
    and ``end`` (of ``last``), in UTF-8 bytes; or of a compound statement's header
    (``start`` None: a header is read as no statement). Its tree is not kept: a file's
    trees held tens of megabytes after the error was told."""

    first: int
    last: int
    start: int | None
    end: int | None


class _Parsed(NamedTuple):
    """A file's statements by line, and the lines they were parsed from (linecache's list:
    another list there is a file read again, to parse again); none where it did not parse,
    or is too long to."""

    source: list[str]
    spans: list[_Lines]
    firsts: list[int]


_PARSED: OrderedDict[str, _Parsed] = OrderedDict()
_PARSED_LOCK = threading.Lock()  # errors are read on a sync's threads too


def statement_at(
    filename: str, lineno: int | None, module_globals: dict[str, Any] | None = None
) -> ast.stmt | None:
    """The simple statement of ``filename`` whose lines hold line ``lineno``; None where the
    file has no source to read (exec'd code, a ``.pyc`` alone), does not parse, or the line
    is not one simple statement's alone. ``module_globals``, those of the module the code is
    of, let its loader give the source where no file holds it (a zip archive's)."""
    held = _holding(filename, lineno, module_globals)
    return None if held is None else span_statement(held[0].source, *held[1])


def statement_lines(
    filename: str, lineno: int | None, module_globals: dict[str, Any] | None = None
) -> tuple[int, int] | None:
    """The first and last lines of the simple statement :func:`statement_at` reads for line
    ``lineno`` of ``filename``; None where it reads none."""
    held = _holding(filename, lineno, module_globals)
    return None if held is None else (held[1].first, held[1].last)


def _holding(
    filename: str, lineno: int | None, module_globals: dict[str, Any] | None
) -> tuple[_Parsed, _Lines] | None:
    """``filename`` parsed, and its one simple statement whose lines hold line ``lineno``;
    None where it has none: no source, no parse, a compound statement's header, or several
    statements sharing the line."""
    parsed = None if lineno is None else _parsed(filename, module_globals)
    if parsed is None or lineno is None:
        return None
    # spans are disjoint but for statements sharing a line: those holding it end the list
    # of spans that start at or before it
    at = bisect_right(parsed.firsts, lineno)
    holding = []
    while at > 0 and parsed.spans[at - 1].last >= lineno:
        at -= 1
        holding.append(parsed.spans[at])
    if len(holding) != 1 or holding[0].start is None:
        return None
    return parsed, holding[0]


def span_statement(
    source: list[str], first: int | None, last: int | None, start: int | None, end: int | None
) -> ast.stmt | None:
    """The statement ``source`` (a file's lines) holds from line ``first``, column ``start``,
    to line ``last``, column ``end`` (columns in UTF-8 bytes, as Python counts them), parsed
    alone; None where the lines are not there or it does not parse alone."""
    lines = source[first - 1 : last] if first else []
    if not lines or start is None or end is None:
        return None
    # columns count UTF-8 bytes: a "µ" before the target, read as characters, cut it wrong
    spans = [line.encode() for line in lines]
    spans[-1] = spans[-1][:end]
    spans[0] = spans[0][start:]
    try:  # a long line's tree is built deep in the stack (a Trainer's, a notebook's): it may
        # run out of depth where the line compiled at import, and the layer's error is the one
        return ast.parse(b"".join(spans).decode(errors="replace").strip()).body[0]
    except (SyntaxError, ValueError, IndexError, RecursionError, MemoryError):
        return None


def source_lines(filename: str, module_globals: dict[str, Any] | None) -> list[str]:
    """``filename``'s lines as linecache reads them, through the loader of the module whose
    ``module_globals`` these are where no file holds them (a zip archive's); none where they
    cannot be had: an import hook's loader that raises there is not let out of the reading,
    in place of the layer's error."""
    try:
        return linecache.getlines(filename, module_globals)
    except Exception:  # linecache lets all but ImportError and OSError out of get_source
        return []


def _parsed(filename: str, module_globals: dict[str, Any] | None) -> _Parsed | None:
    """``filename``'s statements by line, parsed once per reading of the file (none where it
    does not parse, or is too long to); None where it has no source."""
    source = source_lines(filename, module_globals)
    if not source:
        return None
    with _PARSED_LOCK:
        kept = _PARSED.get(filename)
        if kept is not None and kept.source is source:
            _PARSED.move_to_end(filename)
            return kept
    spans = _spans(source)
    if spans is None:  # out of stack or memory here: perhaps not at the next error
        return None
    spans.sort(key=lambda s: (s.first, s.last))
    parsed = _Parsed(source, spans, [s.first for s in spans])  # kept unread too: not again
    with _PARSED_LOCK:
        _PARSED[filename] = parsed
        while len(_PARSED) > _FILES_KEPT:
            _PARSED.popitem(last=False)
    return parsed


def _spans(source: list[str]) -> list[_Lines] | None:
    """The lines of each simple statement of ``source``, and of each compound statement's
    header (the lines before its body's first statement); none where it is too long to parse
    or does not parse; None where the parse ran out of stack or memory."""
    if sum(map(len, source)) > _MOST_SOURCE:
        return []
    try:  # read deep in the stack (a Trainer's, a notebook's), the tree may run out of depth
        tree = ast.parse("".join(source))
    except (SyntaxError, ValueError):
        return []
    except (RecursionError, MemoryError):
        return None
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        inner = _first_inner_line(node)
        if inner is not None:  # compound: its own lines are its header's
            spans.append(_Lines(node.lineno, max(node.lineno, inner - 1), None, None))
        else:
            last, end = node.end_lineno or node.lineno, node.end_col_offset
            spans.append(_Lines(node.lineno, last, node.col_offset, end))
    return spans


def _first_inner_line(node: ast.stmt) -> int | None:
    """The first line of the statements ``node`` holds (a ``match``'s first case's); None
    where it holds none: a simple statement."""
    if isinstance(node, ast.Match):
        return node.cases[0].pattern.lineno
    body = getattr(node, "body", None)
    return body[0].lineno if isinstance(body, list) and body else None
