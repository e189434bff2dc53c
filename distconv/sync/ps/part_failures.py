"""What a shard's disk did with its checkpoint parts, said once: where the shard and the chief
warn of a part not written, and of the disk taking one again.

A disk that cannot take a part (full, a quota, a file in the way) fails every checkpoint alike
until it clears, and a warning at each, in the shard's log and the chief's, buried the run's
output under the same lines for the rest of the job. Each side therefore keeps, per shard, the
kind of the last failure and warns at the first, when the kind changes and when a part is
written again. A failure's kind is its line less the step, which its part's name carries.
"""

from __future__ import annotations

import errno

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
    """The kind of each shard's last failed part, until one is written: what to warn of."""

    def __init__(self) -> None:
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
