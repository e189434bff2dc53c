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
    conjunction: str = "and",
    separator: str = ", ",
    bracketed: bool = False,
    noun: str = "",
    plural: str = "",
    conjoin_last: bool = False,
    more: int = 0,
) -> str:
    """The first ``most`` of ``items`` (each as ``str`` writes it) joined by ``separator``,
    then how many more there are: ``a, b and 2 more``.

    Args:
        items: what the list holds, or its first items where the rest are too many to hold
            (then ``more`` counts those).
        most: how many items are named at most (1 or more).
        conjunction: the word before the count, ``and`` (all of them) or ``or`` (one of them).
        bracketed: the count in brackets after the items: ``a (and 2 more)``.
        noun: what the count counts, ``1 more document``; ``plural`` is its plural
            (``noun`` + ``s`` when not given).
        conjoin_last: where none is counted, the last two items joined by ``conjunction``
            too (``a, b or c``), as a choice among them reads; else by ``separator``.
        more: how many more there are beyond ``items``, counted only.

    Returns:
        ``""`` for no items; the count alone (``2 more``) where none is named.

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
    if rest == 0:
        if conjoin_last and len(named) > 1:
            return f"{separator.join(named[:-1])} {conjunction} {named[-1]}"
        return separator.join(named)
    count = f"{rest} more"
    if noun:
        count += f" {noun if rest == 1 else plural or noun + 's'}"
    if not named:
        return count
    tail = f"({conjunction} {count})" if bracketed else f"{conjunction} {count}"
    return f"{separator.join(named)} {tail}"
