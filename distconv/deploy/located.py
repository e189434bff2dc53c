"""Where each problem of ``distconv check-manifests`` is written: the file, and the line its
object's document starts on (``job.yaml:12: Job x: ...``). :func:`manifest_problems` judges one
job's objects together and names each problem's object, not its file: with several files (a
folder, a chart rendered to many) its reader had to search them all for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from distconv.deploy.check import manifest_problems
from distconv.deploy.shapes import applied_objects
from distconv.deploy.walk import _where

#: a document as read, and where it is: ``job.yaml:12`` (``<stdin>:1``)
Source = tuple[str, Any]


def located_problems(sources: Sequence[Source]) -> list[str]:
    """:func:`manifest_problems` of the documents of ``sources`` (one job), each line led by
    where it is written: the places of the documents whose objects it names, ``, ``-separated
    (an object written twice is applied twice); a line that names no object, by the documents
    that make it alone; one no document makes alone (the job's as a whole) is left as it is."""
    problems = manifest_problems([doc for _, doc in sources])
    written = [_written(doc) for _, doc in sources]
    names = set().union(*(names for names, _ in written))
    alone = _Alone(sources)
    return [_located(problem, sources, written, names, alone) for problem in problems]


class _Alone:
    """The problems of each document of ``sources`` judged alone, found once when first
    asked (only where two documents hold objects a problem names alike)."""

    def __init__(self, sources: Sequence[Source]) -> None:
        self._docs = [doc for _, doc in sources]
        self._problems: dict[int, set[str]] = {}

    def makes(self, index: int, problem: str) -> bool:
        """Whether document ``index`` alone makes ``problem``."""
        if index not in self._problems:
            self._problems[index] = set(manifest_problems([self._docs[index]]))
        return problem in self._problems[index]


def _written(doc: Any) -> tuple[set[str], set[str]]:
    """What ``doc`` stands for: how a problem names each object it creates (a List's items, a
    CronJob's Job too: :func:`~distconv.deploy.shapes.applied_objects`), and the lines that
    name what it alone makes wrong (a field of the wrong type, an item that is no object)."""
    objs, lines = applied_objects([doc])
    return {_where(obj) for obj in objs}, set(lines)


def _located(
    problem: str,
    sources: Sequence[Source],
    written: list[tuple[set, set]],
    names: set[str],
    alone: _Alone,
) -> str:
    """``problem`` led by the places of the documents it is in (:func:`located_problems`):
    those that alone make it, else those that hold the object it names (of ``names``); where
    it names none, those that make it judged alone (one document: that one)."""
    places = [where for (where, _), (_, lines) in zip(sources, written) if problem in lines]
    if not places:
        named = set(_named(problem, names))
        holders = [i for i, (own, _) in enumerate(written) if own & named]
        if not named:  # no object named: the documents that make it alone (one: that one)
            holders = [
                i for i in range(len(sources)) if len(sources) == 1 or alone.makes(i, problem)
            ]
        places = [sources[i][0] for i in _makers(problem, holders, alone)]
    return f"{', '.join(places)}: {problem}" if places else problem


def _makers(problem: str, holders: list[int], alone: _Alone) -> list[int]:
    """Of ``holders`` (the documents holding an object ``problem`` names), those whose own
    problems, each judged alone, hold it: two documents may hold objects named alike (``Job
    ?`` without a name, one name in two namespaces), and each problem is in one of them. All
    of them where none makes it alone (``Job a, Job b: ...`` is made by both together), or
    where each does (an object written twice is applied twice)."""
    if len(holders) < 2:
        return holders
    return [i for i in holders if alone.makes(i, problem)] or holders


def _named(problem: str, names: set[str]) -> list[str]:
    """The objects of ``names`` that ``problem`` starts by naming: one (``Job a: ...``, ``Job a
    container c: ...``) or several, comma-separated (``Job a, Job b: ...``), each the longest
    name followed by ``:``, a space or a comma (``Job a`` names no problem of ``Job a-b``)."""
    named: list[str] = []
    rest = problem
    while fits := [name for name in names if _starts_with_name(rest, name)]:
        named.append(max(fits, key=len))
        rest = rest[len(named[-1]) :]
        if not rest.startswith(", "):
            break
        rest = rest[2:]
    return named


def _starts_with_name(text: str, name: str) -> bool:
    """Whether ``text`` starts with ``name`` as a whole, not a longer name's start."""
    return text.startswith(name) and text[len(name) : len(name) + 1] in (":", " ", ",")
