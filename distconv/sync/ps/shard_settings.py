"""The settings every shard of one job must share, read from their ``hello`` replies.

A shard's ``--mode`` decides how it applies pushes, and in async mode its ``--max-staleness``
which it drops: shards of one job started with others ran two schemes in one job (some blocks
updated as pushed, others at the step's end; or pushes dropped by one shard and applied by
another), and the run recorded a list for its scheme. A worker refuses them at setup, naming
the first two shards that differ and what each says.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from distconv.sync.base import SyncError


def agreed_settings(
    replies: Sequence[Mapping[str, Any]], named: Callable[[Sequence[int]], str]
) -> tuple[str, int | None]:
    """The mode and, in async mode, the staleness bound that every shard's ``hello`` reply
    (``replies``, shard 0 first, each a checked mode) says. A bound is compared among the
    shards that say one (an older shard says none); a sync shard's, never read, is not.

    Args:
        replies: the replies' headers.
        named: a shard's words in a message (``0 (host:port)``).

    Returns:
        ``(mode, max_staleness)``; the bound None in sync mode or where no shard says one.

    Raises:
        SyncError: two shards differ on ``--mode``, or async ones on ``--max-staleness``.
    """
    _refuse_other("--mode", [h["mode"] for h in replies], named)
    mode = replies[0]["mode"]
    if mode != "async":
        return mode, None
    bounds = [v if type(v := h.get("max_staleness")) is int else None for h in replies]
    _refuse_other("--max-staleness", bounds, named)
    return mode, next((b for b in bounds if b is not None), None)


def _refuse_other(flag: str, values: Sequence[Any], named: Callable[[Sequence[int]], str]) -> None:
    """Raise where a shard's value (None: unsaid, not compared) differs from the first said."""
    said = [(s, v) for s, v in enumerate(values) if v is not None]
    other = next(((s, v) for s, v in said if v != said[0][1]), None)
    if other is not None:
        (first, a), (second, b) = said[0], other
        raise SyncError(
            f"pserver shards disagree on {flag}: shard {named([first])} says {a}, shard "
            f"{named([second])} says {b}; start every shard of a job with the same {flag}"
        )
