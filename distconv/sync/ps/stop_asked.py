"""A draining shard's ask that its workers stop, as its ``ok`` replies carry it.

A shard stopped alone by SIGTERM (``systemctl stop`` or a reboot of its host, a node drain)
while its workers train would otherwise leave them training on until it fails the job, losing
the work since their last checkpoint. So while it drains, each ``ok`` reply carries
:data:`STOP_ASKED` (the shard's index); a worker that reads it asks for the same checkpointed
stop its own SIGTERM gives (:func:`~distconv.stop_agreement.stop_agreed`), and the shard
stops once they said ``bye``. The field is optional: a worker of an older release ignores it
(a reply's unknown fields are not checked), and one of this release gets none from an older
shard, which fails the job on its own stop as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the ``ok`` reply field of a draining shard: its index (``docs/protocol.md``, Common fields)
STOP_ASKED = "stop_asked"


def stop_asked_fields(shard: int) -> dict[str, int]:
    """The fields a draining ``shard`` adds to each of its ``ok`` replies."""
    return {STOP_ASKED: shard}


def asking_shard(header: Mapping[str, Any]) -> int | None:
    """The shard a reply ``header`` says asks its workers to stop, or None: absent (a shard
    that does not drain, or of an older release), or not a shard's index (ignored, as an
    unknown field is: a stop asked by mistake would cost a restart)."""
    field = header.get(STOP_ASKED)
    return field if type(field) is int and field >= 0 else None
