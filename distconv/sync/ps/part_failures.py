"""What a shard's disk did with its checkpoint parts: whether a prune can make room for one."""

from __future__ import annotations

import errno

#: the errors a prune can cure: the disk, or this user's share of it, has no room left. Not
#: ``EFBIG`` (a file size limit, ``RLIMIT_FSIZE``): no file deleted makes this one fit.
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})


def no_room(exc: BaseException) -> bool:
    """Whether ``exc`` (a ``CheckpointError``) came of the disk having no room: the
    ``OSError`` it was raised from is kept as its context though not shown (``from None``)."""
    cause = exc.__cause__ or exc.__context__
    return isinstance(cause, OSError) and cause.errno in NO_ROOM
