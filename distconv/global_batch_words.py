"""How a resume's refusal of another global batch says it in numbers: what the checkpoint's
run and this one multiply out to, and the ``--batch-size`` or ``--accumulate`` that keeps the
checkpoint's on this run's world size, or that none does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distconv.scheme_history import WORLD_SIZE

#: what the clause says where a side records too little to multiply out (an older checkpoint)
PLAIN = (
    " The global batch (world size x batch size x accumulate) must stay the same across a resume."
)


def global_batch_clause(theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> str:
    """The sentence that ends a refusal of another global batch: ``checkpoint 16 = 1 worker x
    16 x 1 pass, this run 32 = 2 workers x 16 x 1 pass; --batch-size 8 keeps it on 2 workers``.
    ``theirs``, ``ours``: the checkpoint's facts and this run's (``global_batch``,
    ``batch_size``, ``accumulate``; the checkpoint's world size where it records one)."""
    old, new = _factors(theirs), _factors(ours)
    if old is None or new is None:
        return PLAIN
    return (
        f"{PLAIN[:-1]}: checkpoint {_product(*old)}, this run {_product(*new)}; "
        f"{_keeping(old[0], new[1], new[2], new[3])}."
    )


def _factors(facts: Mapping[str, Any]) -> tuple[int, int, int, int] | None:
    """``(global batch, world size, batch size, accumulate)``, or None where one is unknown or
    they do not multiply out (a world size not recorded is the quotient)."""
    counts = [facts.get(k) for k in ("global_batch", "batch_size", "accumulate")]
    if not all(type(n) is int and n > 0 for n in counts):
        return None
    total, batch, passes = counts
    world = facts.get(WORLD_SIZE)
    if type(world) is not int:
        world, rest = divmod(total, batch * passes)
        if rest or world < 1:
            return None
    return (total, world, batch, passes) if world * batch * passes == total else None


def _product(total: int, world: int, batch: int, passes: int) -> str:
    workers = "worker" if world == 1 else "workers"
    return f"{total} = {world} {workers} x {batch} x {passes} {'pass' if passes == 1 else 'passes'}"


def _keeping(total: int, world: int, batch: int, passes: int) -> str:
    """The flags that make ``total`` on ``world`` workers: the batch size at these passes, else
    the passes at this batch size, else the batch size at one pass; or that none does."""
    on = f"on {world} worker{'' if world == 1 else 's'}"
    if total % (world * passes) == 0:
        return f"--batch-size {total // (world * passes)} keeps it {on}"
    if total % (world * batch) == 0:
        return f"--accumulate {total // (world * batch)} keeps it {on}"
    if total % world == 0:
        return f"--batch-size {total // world} --accumulate 1 keeps it {on}"
    return f"no --batch-size or --accumulate keeps it {on} ({total} is no multiple of {world})"
