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
from typing import NamedTuple

#: how many files' statements are kept parsed: those that raised the errors read lately
_FILES_KEPT = 32


class _Lines(NamedTuple):
    """The lines ``first..last`` of one statement, or of a compound statement's header
    (``node`` None: a header is read as no statement)."""

    first: int
    last: int
    node: ast.stmt | None


class _Parsed(NamedTuple):
    """A file's statements by line, and the lines they were parsed from (linecache's list:
    another list there is a file read again, to parse again)."""

    source: list[str]
    spans: list[_Lines]
    firsts: list[int]


_PARSED: OrderedDict[str, _Parsed] = OrderedDict()
_PARSED_LOCK = threading.Lock()  # errors are read on a sync's threads too


def statement_at(filename: str, lineno: int | None) -> ast.stmt | None:
    """The simple statement of ``filename`` whose lines hold line ``lineno``; None where the
    file has no source to read (exec'd code, a ``.pyc`` alone), does not parse, or the line
    is not one simple statement's alone."""
    if lineno is None:
        return None
    parsed = _parsed(filename)
    if parsed is None:
        return None
    # spans are disjoint but for statements sharing a line: those holding it end the list
    # of spans that start at or before it
    at = bisect_right(parsed.firsts, lineno)
    holding = []
    while at > 0 and parsed.spans[at - 1].last >= lineno:
        at -= 1
        holding.append(parsed.spans[at])
    return holding[0].node if len(holding) == 1 else None


def _parsed(filename: str) -> _Parsed | None:
    """``filename``'s statements by line, parsed once per reading of the file; None where it
    has no source or does not parse."""
    source = linecache.getlines(filename)
    if not source:
        return None
    with _PARSED_LOCK:
        kept = _PARSED.get(filename)
        if kept is not None and kept.source is source:
            _PARSED.move_to_end(filename)
            return kept
    try:  # read deep in the stack (a Trainer's, a notebook's), the tree may run out of depth
        tree = ast.parse("".join(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    spans = sorted(_spans(tree), key=lambda s: (s.first, s.last))
    parsed = _Parsed(source, spans, [s.first for s in spans])
    with _PARSED_LOCK:
        _PARSED[filename] = parsed
        while len(_PARSED) > _FILES_KEPT:
            _PARSED.popitem(last=False)
    return parsed


def _spans(tree: ast.Module) -> list[_Lines]:
    """The lines of each simple statement of ``tree``, and of each compound statement's
    header (the lines before its body's first statement)."""
    spans = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt):
            continue
        inner = _first_inner_line(node)
        if inner is not None:  # compound: its own lines are its header's
            spans.append(_Lines(node.lineno, max(node.lineno, inner - 1), None))
        else:
            spans.append(_Lines(node.lineno, node.end_lineno or node.lineno, node))
    return spans


def _first_inner_line(node: ast.stmt) -> int | None:
    """The first line of the statements ``node`` holds (a ``match``'s first case's); None
    where it holds none: a simple statement."""
    if isinstance(node, ast.Match):
        return node.cases[0].pattern.lineno
    body = getattr(node, "body", None)
    return body[0].lineno if isinstance(body, list) and body else None
