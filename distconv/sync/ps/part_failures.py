"""What a shard's disk did with its checkpoint parts, said once: where the shard and the chief
warn of a part not written, and of the disk taking one again.

A disk that cannot take a part (full, a quota, a file in the way) fails every checkpoint alike
until it clears, and a warning at each, in the shard's log and the chief's, buried the run's
output under the same lines for the rest of the job. Each side therefore keeps, per shard, the
kind of the last failure and warns at the first, when the kind changes and when a part is
written again. A failure's kind is its line less the step, which its part's name carries.
Both keep it per seeding (:func:`failures_of`): the chief per setup of its sync, the shard per
seed, which each setup sends. A second fit in a notebook, a resume in the same process, or the
next job on a shard that lives on warns afresh, where the first one's warning is long out of
view.
"""

from __future__ import annotations

import errno
import logging
from typing import Any

log = logging.getLogger("distconv.pserver")

#: what a part the disk cannot take costs, said where the shard and the chief warn of one
EXTRA_COPY = (
    "this part is only the shards' extra copy of the checkpoint, never read back: the chief's "
    "checkpoint holds all a resume needs, and training goes on (a shard started without "
    "--checkpoint-dir writes no parts)"
)

#: the errors a prune can cure: the disk, or this user's share of it, has no room left. Not
#: ``EFBIG`` (a file size limit, ``RLIMIT_FSIZE``): no file deleted makes this one fit.
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})

#: said after the first warning of a kind, so that no one waits for the next
SAID_ONCE = "said once, until it fails otherwise or a part is written again"


def no_room(exc: BaseException) -> bool:
    """Whether ``exc`` (a ``CheckpointError``) came of the disk having no room: the
    ``OSError`` it was raised from is kept as its context though not shown (``from None``)."""
    cause = exc.__cause__ or exc.__context__
    return isinstance(cause, OSError) and cause.errno in NO_ROOM


def failure_kind(line: str, step: int | str) -> str:
    """``line``, why the part of ``step`` was not written, less the step: the same for every
    checkpoint the same cause fails."""
    return line.replace(f"-step{step}.safetensors", "-step*.safetensors")


class PartFailures:
    """The kind of each shard's last failed part, until one is written: what to warn of.
    ``seeding``: the setup or seed these are of (see :func:`failures_of`)."""

    def __init__(self, seeding: object = None) -> None:
        self.seeding = seeding
        self._last: dict[int, str] = {}

    def failed(self, shard: int, kind: str) -> bool:
        """Note that ``shard`` wrote no part, for ``kind``; whether to warn (a kind not the
        last one's)."""
        new = self._last.get(shard) != kind
        self._last[shard] = kind
        return new

    def written(self, shard: int) -> bool:
        """Note that ``shard`` wrote its part; whether to say so (its last one failed)."""
        return self._last.pop(shard, None) is not None

    def heard(self, shard: int, unwritten: str | None, step: int, said: str) -> None:
        """Warn, as the chief, of ``shard``'s reply to its checkpoint request of ``step``:
        ``unwritten``, why it wrote no part (None: it wrote one), once per kind of failure,
        and the first part written after one. ``said`` names the rank, the checkpoint and the
        shard."""
        if unwritten is None:
            if self.written(shard):
                log.warning("%s: the shard's disk took its part again", said)
        elif self.failed(shard, failure_kind(unwritten, step)):
            log.warning("%s wrote no part: %s; %s; %s", said, unwritten, EXTRA_COPY, SAID_ONCE)


def failures_of(holder: dict[str, Any], seeding: object) -> PartFailures:
    """The :class:`PartFailures` kept in ``holder`` (the ``__dict__`` of the chief's sync or of
    a shard: their mixins have no ``__init__``), afresh at each ``seeding`` (the sync's count
    of its setups, the shard's seed id): kept for the process's life, a second fit in a
    notebook, or the next job on the same shards, said nothing of a disk the first had found
    full, its checkpoints short of the shard's parts without a word."""
    failures = holder.get("_unwritten_parts")
    if failures is None or failures.seeding != seeding:
        failures = holder["_unwritten_parts"] = PartFailures(seeding)
    return failures
