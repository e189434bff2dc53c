"""A long list said short in a message: the first few items named, the rest counted
(``a, b and 2 more``). A message that names every one of 200000 shards or 2000 files is a line
of megabytes; one that names a few and counts the rest says the same in a line a reader reads.
Every message that shortens a list says it through :func:`short_list`, so each count is right
at the edges (one more, none more) wherever it is said.
"""

from __future__ import annotations

from collections.abc import Sequence


def short_list(
    items: Sequence[object],
    most: int,
    *,
    separator: str = ", ",
    bracketed: bool = False,
    noun: str = "",
    more: int = 0,
    choice: bool = False,
) -> str:
    """The first ``most`` of ``items`` (each as ``str`` writes it) joined by ``separator``,
    then how many more there are: ``a, b and 2 more``.

    Args:
        items: what the list holds, or its first items where the rest are too many to hold
            (then ``more`` counts those).
        most: how many items are named at most (1 or more).
        separator: what joins the items named: ``", "``, or ``"; "`` where an item holds
            commas, or ``" or "``.
        bracketed: the count in brackets after the items: ``a (and 2 more)``.
        noun: what the count counts, ``1 more document``, ``2 more documents``.
        more: how many more there are beyond ``items``, counted only.
        choice: the items are ones to pick from: the count follows ``or``, not ``and``
            (``a, b or 2 more``), and where none is counted the last two are joined by ``or``
            too (``a, b or c``); else they are joined by ``separator`` (``a, b, c``).

    Returns:
        ``""`` where there is nothing to name or count; the count alone (``2 more``) where
        ``items`` is empty but ``more`` is not.

    Raises:
        ValueError: ``most`` below 1 (nothing named, a count with nothing before it) or
            ``more`` below 0.
    """
    if most < 1:
        raise ValueError(f"short_list: most must be 1 or more, got {most}")
    if more < 0:
        raise ValueError(
            f"short_list: more, the count beyond the items, must be 0 or more, got {more}"
        )
    named = [str(item) for item in items[:most]]
    rest = len(items) - len(named) + more
    conjunction = "or" if choice else "and"
    if rest == 0:
        if choice and len(named) > 1:
            return f"{separator.join(named[:-1])} {conjunction} {named[-1]}"
        return separator.join(named)
    count = f"{rest} more" + (f" {noun}{'s' * (rest != 1)}" if noun else "")
    if not named:
        return count
    tail = f"({conjunction} {count})" if bracketed else f"{conjunction} {count}"
    return f"{separator.join(named)} {tail}"
