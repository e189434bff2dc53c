"""The words by which either side of a parameter-server job names the peer that kept it
waiting past its ``--timeout``, in one place for the side that writes them and the launcher
that reads them back: a shard names the ranks it waited for (:func:`silent_text`,
:func:`sent_nothing_text`; read by :func:`silent_ranks_in`), a worker the shards that never
answered it (:data:`NO_ANSWER_FROM`, :data:`NO_ANSWER_WHY`, :data:`CAME_BACK`,
:func:`unresolved_text`; read by
:func:`unanswering_shards_in`). The launcher blames the peer named, not the victim that exited
first. A change of the words on one side only would silently blame the victim again. This
module needs neither numpy nor zmq (the launcher imports it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal

from distconv.rank_endings import ERROR_CLASS, PSERVER_ASKED

#: seconds as the words write them and their readers read them back: digits, a point and digits
_SECONDS = r"\d+(?:\.\d+)?"


def seconds_text(seconds: float) -> str:
    """``seconds`` (finite, as every ``--timeout`` is) as the words say a wait: six significant
    digits, as ``:g`` writes them, but never in exponent form (``1500000``, not ``1.5e+06``,
    ``0.00001``, not ``1e-05``), which the readers here would not read back, and so blame the
    victim that exited first rather than the peer named."""
    return format(Decimal(f"{seconds:.6g}"), "f")


#: how a shard says that ranks kept it waiting past its ``--timeout``, and what it adds where
#: it knows nothing else of them (:data:`RAISE_TIMEOUT`, whoever started the shards)
_SILENT = "silent for"
_SENT_NOTHING = "sent nothing for"
RAISE_TIMEOUT = (
    "a rank slower than this is a straggler: raise the shards' --timeout with the workers' "
    "(distconv-launch gives them distconv train's, 60 s beside a program of your own)"
)
#: a rank as a shard names it, ``rank 1 (host vm, last step 184)`` (no parentheses inside)
_NAMED_RANK = r"rank \d+ \([^()]*\)"
#: a rank's line (behind what :data:`~distconv.rank_endings.DIFFERENT_JOBS` reads before a
#: shard's reply) that quotes those words, none of what else the shard knows after them
#: (`` (rank 1 closed)``): the words from the ranks on (group 1), the ranks (group 2)
_SILENT_RANKS = re.compile(
    rf"(?:[^:]+: error: )?{ERROR_CLASS}(?:rank \d+{PSERVER_ASKED}: )?{ERROR_CLASS}"
    rf"(((?:{_NAMED_RANK}, )*{_NAMED_RANK}) (?:{_SILENT}|{_SENT_NOTHING} .*? within) "
    rf"{_SECONDS} s(?:[;:] .*)?)",
    re.DOTALL,
)


def silent_text(who: str, seconds: float) -> str:
    """``rank 1 (host vm, last step 144) silent for 10 s``: how an asynchronous shard names a
    rank (``who``, as the shard names it) that sent no request nor beat for its ``--timeout``
    (``seconds``)."""
    return f"{who} {_SILENT} {seconds_text(seconds)} s"


def sent_nothing_text(who: str, held: str, seconds: float) -> str:
    """``rank 1 (host vm, last step 184) sent nothing for step 185 (the push of ...) within
    10 s``: how a shard names the ranks (``who``: ``rank 0 (...), rank 1 (...)``) that a held
    request (``held``, as :func:`distconv.sync.ps.stuck.held_words` names it) waited for past
    its ``--timeout`` (``seconds``)."""
    return f"{who} {_SENT_NOTHING} {held} within {seconds_text(seconds)} s"


def silent_ranks_in(lines: Sequence[str]) -> tuple[list[int], str] | None:
    """The ranks that the last of ``lines`` (each a rank's text, as
    :data:`~distconv.rank_endings.DIFFERENT_JOBS` reads it) quoting a shard's
    :func:`silent_text` or :func:`sent_nothing_text` names, and the shard's words from them on;
    None where none does."""
    for line in reversed(lines):
        if found := _SILENT_RANKS.fullmatch(line):
            return [int(r) for r in re.findall(r"rank (\d+) \(", found[2])], found[1]
    return None


#: what a worker says before the shards that never answered it (``rank 0: no answer to step 46
#: from pserver shard(s) 0 (127.0.0.1:5) within 1.5 s``), read back to blame a shard
NO_ANSWER_FROM = "from pserver shard(s) "
#: what it adds where it knows no likelier cause (after ``within 15 s (1.5 x --timeout 10 s)``)
NO_ANSWER_WHY = "the shard is gone, stopped or unreachable; raise --timeout if it is only slow"
#: what it adds instead where the shard's connection dropped and came back while it waited: a
#: request in the connection that dropped is lost (:mod:`distconv.sync.ps.lost_requests`)
CAME_BACK = (
    "; its connection dropped and came back during the wait (the shard restarted?): a request "
    "in the connection that dropped is lost, so no --timeout brings its answer; if the shard "
    "restarted, restart the job from its newest checkpoint"
)
_UNRESOLVED = "; the host name {host} of shard {shard} does not resolve (yet: {why}): check its "
_UNRESOLVED += "name in --pservers, or its DNS record"


def unresolved_text(host: str, shard: int, why: str) -> str:
    """``; the host name 'h' of shard 1 does not resolve (yet: Name or service not known): ...``:
    what a worker adds instead where the name of a shard it gave up on (``host``) does not
    resolve, the resolver saying ``why``."""
    return _UNRESOLVED.format(host=repr(host), shard=shard, why=why)


#: the causes a worker adds that blame the shard as :data:`NO_ANSWER_WHY` does: it restarted, or
#: its name does not resolve
_SHARD_CAUSES = "|".join(
    [
        re.escape(f": {NO_ANSWER_WHY}"),
        re.escape(CAME_BACK),
        re.escape(_UNRESOLVED)
        .replace(r"\{host\}", "'[^']*'")
        .replace(r"\{shard\}", r"\d+")
        .replace(r"\{why\}", r"[^()]*"),
    ]
)
_NO_ANSWER = re.compile(
    rf"(?:[^:]+: error: )?{ERROR_CLASS}(rank \d+: no answer to .*? {re.escape(NO_ANSWER_FROM)}"
    rf"((?:\d+ \([^()]*\), )*\d+ \([^()]*\)) within {_SECONDS} s"
    rf"(?: \(\S+ x --timeout \S+ s\)(?:{_SHARD_CAUSES}))?)",
    re.DOTALL,
)


def unanswering_shards_in(lines: Sequence[str]) -> tuple[list[int], str] | None:
    """The shards that the last of ``lines`` (a rank's text each) saying that they never answered
    it names, its words from ``rank N: `` on; None where none says so, or adds a likelier cause
    (`` (shard(s) 0 wait up to 60 s for every worker``, ``; the connection's handshake ...``)
    than :data:`NO_ANSWER_WHY`, which a worker says where it knows none, or a cause of the
    shard's own (:data:`CAME_BACK`, :func:`unresolved_text`)."""
    for line in reversed(lines):
        if found := _NO_ANSWER.fullmatch(line):
            return [int(s) for s in re.findall(r"(\d+) \(", found[2])], found[1]
    return None


#: where a worker's words giving up on its shards begin, anywhere in a line (a cause that quotes
#: them, a traceback's last), and the wait they say after :data:`NO_ANSWER_FROM`
_GAVE_UP_START = re.compile(r"rank \d+: no answer to ")
_GAVE_UP_WAIT = re.compile(rf" within {_SECONDS} s")


def gave_up_in(lines: Sequence[str]) -> str | None:
    """The words of the last of ``lines`` in which a worker gives up waiting on its shards
    (:data:`NO_ANSWER_FROM`'s, with or without a likelier cause after them), from ``rank N: ``
    on: a wait given up, which a peer stopped meanwhile may have caused as well as the shard;
    None where none says so."""
    for line in reversed(lines):
        if (words := _gave_up_words(line)) is not None:
            return words
    return None


def _gave_up_words(line: str) -> str | None:
    """``line`` from its first ``rank N: no answer to `` on, where `` from pserver shard(s) ``
    and then `` within N s`` follow; else None. Three searches, each once along the line: one
    pattern with a lazy wildcard before each part took minutes on a long last line that
    repeats the first two and lacks the third (a later start only has fewer ways to go on,
    so the first is the one to try)."""
    if (start := _GAVE_UP_START.search(line)) is None:
        return None
    shards = line.find(f" {NO_ANSWER_FROM}", start.end())
    if shards < 0 or not _GAVE_UP_WAIT.search(line, shards + 1 + len(NO_ANSWER_FROM)):
        return None
    return line[start.start() :]
