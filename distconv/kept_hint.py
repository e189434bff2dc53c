"""What the failure of a gradient comparison adds where the numeric derivative of a parameter
is 0 and the analytic one is not: whether the output depends on the parameter at all, for
:func:`distconv.finite_differences.compare`'s message."""

from __future__ import annotations

from typing import Any

from distconv.parameter import Parameter


def kept_hint(obj: Any, owner: Any) -> str:
    """Where ``owner`` is a parameter and ``f`` stays within rounding when every entry of it
    moves by 1 or more, what the message adds: a layer that kept ``self.w.value`` from its
    ``__init__`` computes with that array while the check (and the Trainer's ``dtype=`` cast,
    and a sync) replaces ``p.value``, and was told only "numeric 0". Empty otherwise (a
    derivative of 0 at one entry of a parameter the output does depend on), and where the
    layer raises at the moved values."""
    if not isinstance(owner, Parameter):
        return ""
    v = owner.value
    try:
        owner.value = (v + 1 + abs(v)).astype(v.dtype)
        moved = obj.value()
    except Exception:  # a layer that refuses the moved values: no verdict on the hint
        return ""
    finally:
        owner.value = v
    if not abs(moved - obj.f0) <= 10 * obj.rounding:
        return ""
    return (
        f"; the output does not depend on {owner.name}'s current value (it stays when all of "
        "it moves): does the layer keep an old array (self.w.value from __init__) instead of "
        "reading p.value in each forward and backward?"
    )
