"""A worker's start-up comparison of the job description with every other rank's, through a
gather on shard 0 (:meth:`~distconv.sync.ps.client.PServerSync.all_equal`).

A gather's reply holds every rank's value in one header frame, capped at
:data:`~distconv.sync.ps.wire.MAX_HEADER_BYTES`; a description holds each parameter's layout
and, from the Trainer, each layer's structure: a few hundred bytes a layer, which times the
workers passed the cap (a worker refused a legitimate job as a malformed reply). So the ranks
gather a digest first; only when the digests differ, two descriptions: the first rank's and
that of the first rank unlike it, which name the difference for every rank.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from distconv.sync.description import as_sent, digest, first_difference
from distconv.sync.errors import job_refusal


def gather_problem(
    got: Any, answer: str, want: int, kind: str, own: tuple[int, Any] | None = None
) -> str | None:
    """What is wrong with shard 0's answer ``got`` to a gather of ``kind``, or None:
    ``values``, a list of one value per rank (``want`` ranks) holding at this rank's place the
    value it sent (``own``: ``(rank, value)``; shard 0 answers each live rank's as it came, so
    a ``null`` there, a rank lost, passed all_equal with nothing compared, and another digest
    failed :func:`check_all_equal` with a bare StopIteration), an ``all_equal``'s each a str
    or None (a rank lost; another failed :func:`check_all_equal` in ``json.loads`` with a
    bare TypeError); an allreduce's ``sum``, a list of ``want`` numbers (a bool is no number:
    msgpack's ``true`` became 1.0; a string or nil failed ``float()``, naming no shard)."""
    if type(got) is not list or len(got) != want:
        return f"not a list of {want}"
    if answer == "sum" and not all(type(v) in (int, float) for v in got):
        return "not all numbers"
    if kind == "all_equal" and not all(v is None or type(v) is str for v in got):
        return "not all strings or nil"
    if own is not None and got[own[0]] != own[1]:
        return f"rank {own[0]}'s value is not the one it sent"
    return None


def check_all_equal(
    gather: Callable[[str, Any], list[Any]], rank: int, description: Mapping[str, Any]
) -> None:
    """Raise :class:`~distconv.sync.errors.JobRefused` naming the first rank whose description
    differs from this rank's, and the first difference, or the rank that could not set up
    (marked so: :func:`~distconv.sync.errors.job_refusal`). ``gather(kind, value)`` is the
    worker's gather on shard 0: every live rank sees the same digests, so every rank makes the
    same number of gathers."""
    ours = as_sent(description)
    mine = digest(ours)
    digests = gather("all_equal", mine)
    if all(d is None or d == mine for d in digests):  # None: a rank lost (async, continue)
        return
    # Each rank compares with the first rank unlike it: the first live rank, or (for the
    # ranks of its digest) the first rank of another digest. Those two alone send their
    # description: one from every digest would not fit a reply when many ranks differ.
    live = [(r, d) for r, d in enumerate(digests) if d is not None]
    senders = {live[0][0], next(r for r, d in live if d != live[0][1])}
    texts = gather("all_equal", json.dumps(ours, sort_keys=True) if rank in senders else None)
    other = next(r for r, d in live if d != mine)
    theirs = _description(texts[other])
    diff = first_difference(ours, theirs) if isinstance(theirs, dict) else None
    unread = " (shard 0 answered its description as no JSON map)" if theirs is False else ""
    said = diff or f"digest {mine} here, {digests[other]} there{unread}"
    raise job_refusal(rank, other, ours, theirs, said)  # the launcher reads it


def _description(text: str | None) -> dict[str, Any] | None | bool:
    """Another rank's description from its JSON ``text``; None for none (a rank lost), False
    for text that is no JSON map (a foreign or tampered answer, which ``json.loads`` or
    :func:`first_difference` failed on with a bare error naming neither rank; nested deeper
    than ``json.loads`` recurses, a RecursionError)."""
    if text is None:
        return None
    try:
        theirs = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return theirs if isinstance(theirs, dict) else False
