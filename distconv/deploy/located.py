"""Where each problem of ``distconv check-manifests`` is written: the file, and the line its
object's document starts on (``job.yaml:12: Job x: ...``). :func:`manifest_problems` judges one
job's objects together and names each problem's object, not its file: with several files (a
folder, a chart rendered to many) its reader had to search them all for it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from distconv.deploy.check import manifest_problems
from distconv.deploy.shapes import applied_objects
from distconv.deploy.walk import _where
from distconv.short_lists import short_list

#: a document as read, and where it is: ``job.yaml:12`` (``<stdin>:1``)
Source = tuple[str, Any]
#: the places a line names at most; the rest are counted (``a.yaml:1, ..., e.yaml:1 and 1995
#: more documents: ...``): 2000 unnamed ConfigMaps, each missing a label, would name 2000 files a
#: line. A place is a document (one file may hold many), so the count says documents
MAX_PLACES = 5
#: each word of a problem that may start an object's name: the first, or one after a space or
#: ``(``, itself followed by a space (``Job a``, ``... but StatefulSet s serves``, ``(Job a)``)
_WORD = re.compile(r"(?<![^ (])[^ (][^ ]*(?= )")
#: an object named with its name quoted, as a check names the object another refers to
#: (``StatefulSet s: Service 's' must set ...``): its kind and name
_QUOTED = re.compile(r"(?<![^ (])([^ (][^ ]*) '([^' ]*)'")


def located_problems(sources: Sequence[Source]) -> list[str]:
    """:func:`manifest_problems` of the documents of ``sources`` (one job), each line led by
    where it is written: the places of the documents whose objects it names, wherever in the
    line (``Job a: ... but StatefulSet s serves ...`` names both files), ``, ``-separated (an
    object written twice is applied twice); a line that names no object, by the documents that
    make it alone; one no document makes alone (the job's as a whole) is left as it is. Each
    distinct line once, its places named (the first :data:`MAX_PLACES`, then how many more):
    the same problem made by many documents is one line, not one for each of them."""
    problems = manifest_problems([doc for _, doc in sources])
    index = _Index(sources)
    return [_located(problem, sources, index) for problem in dict.fromkeys(problems)]


class _Index:
    """What each document of ``sources`` stands for, looked up by a problem's words: the
    documents holding each object, by how a problem names it (a List's items, a CronJob's Job
    too: :func:`~distconv.deploy.shapes.applied_objects`); those that alone make each line of
    what is refused in them (a field of the wrong type, an item that is no object); and, asked
    only where those do not tell, the problems of each document judged alone."""

    def __init__(self, sources: Sequence[Source]) -> None:
        self._docs = [doc for _, doc in sources]
        self.holders: dict[str, list[int]] = {}
        self.refusers: dict[str, list[int]] = {}
        for number, doc in enumerate(self._docs):
            objs, lines = applied_objects([doc])
            for name in dict.fromkeys(map(_where, objs)):
                self.holders.setdefault(name, []).append(number)
            for line in dict.fromkeys(lines):
                self.refusers.setdefault(line, []).append(number)
        self.longest = max(map(len, self.holders), default=0)
        self.first_words = {name.split(" ", 1)[0] for name in self.holders}
        self._alone: dict[int, set[str]] = {}

    def makes(self, number: int, problem: str) -> bool:
        """Whether document ``number`` alone makes ``problem`` (judged once, when first asked)."""
        if number not in self._alone:
            self._alone[number] = set(manifest_problems([self._docs[number]]))
        return problem in self._alone[number]


def _located(problem: str, sources: Sequence[Source], index: _Index) -> str:
    """``problem`` led by the places of the documents it is in (:func:`located_problems`):
    those that alone make it, else those that hold the objects it names; where it names none,
    those that make it judged alone (one document: that one)."""
    numbers = index.refusers.get(problem)
    if not numbers:
        named = _named(problem, index)
        if named:
            holders = sorted({number for name in named for number in index.holders[name]})
            numbers = _makers(problem, holders, index)
        else:
            numbers = [
                n for n in range(len(sources)) if len(sources) == 1 or index.makes(n, problem)
            ]
    return f"{_places([sources[n][0] for n in numbers])}: {problem}" if numbers else problem


def _places(places: list[str]) -> str:
    """``places`` ``, ``-separated, the first :data:`MAX_PLACES` of them and a count of the rest,
    in documents: each place is one, and one file may hold many (``a.yaml:1, a.yaml:3``)."""
    return short_list(places, MAX_PLACES, noun="document")


def _makers(problem: str, holders: list[int], index: _Index) -> list[int]:
    """Of ``holders`` (the documents holding an object ``problem`` names), those whose own
    problems, each judged alone, hold it: two documents may hold objects named alike (``Job
    ?`` without a name, one name in two namespaces), and each problem is in one of them; a
    word of the line may read as another object's name. All of them where none makes it alone
    (``Job a: ... but StatefulSet s ...`` is made by both together), or where each does (an
    object written twice is applied twice)."""
    if len(holders) < 2:
        return holders
    return [number for number in holders if index.makes(number, problem)] or holders


def _named(problem: str, index: _Index) -> set[str]:
    """The objects that ``problem`` names: where it starts (``Job a: ...``, ``Job a container
    c: ...``, ``Job a, Job b: ...``) and further on (``... but StatefulSet s serves ...``,
    ``(StatefulSet s)``, ``Service 's'``), each the longest name that a word starts, followed
    by ``:``, a space, a comma, ``)`` or the line's end (``Job a`` names no problem of ``Job
    a-b``)."""
    words = _WORD.finditer(problem)
    starts = (word.start() for word in words if word.group() in index.first_words)
    named = {name for name in (_first_name(problem[at:], index) for at in starts) if name}
    quoted = (" ".join(found.groups()) for found in _QUOTED.finditer(problem))
    return named | {name for name in quoted if name in index.holders}


def _first_name(text: str, index: _Index) -> str | None:
    """The longest object name ``text`` starts with as a whole, not a longer name's start:
    followed by ``:``, a space, a comma, ``)`` or nothing. Looked up, each end no longer than
    the longest name: a problem is not compared with each of thousands of objects (a long
    List)."""
    ends = range(min(len(text), index.longest), 0, -1)
    whole = (end for end in ends if end == len(text) or text[end] in ":, )")
    return next((text[:end] for end in whole if text[:end] in index.holders), None)
