"""What the failure of a gradient comparison adds where the numeric derivative of a parameter
is 0 and the analytic one is not: whether the output depends on the parameter at all, for
:func:`distconv.finite_differences.compare`'s message."""

from __future__ import annotations

from typing import Any

from distconv.parameter import Parameter


def kept_hint(obj: Any, owner: Any) -> str:
    """Where ``owner`` is a parameter and ``f`` stays within rounding when every entry of it
    moves by 1 or more, what the message adds. Where ``f`` moves when the arrays ``owner``
    held (its value now, and ``obj.originals``' for it: a check that computes on copies)
    move in place instead: the layer keeps one of them (``self.w.value`` from ``__init__``)
    and computes with it while the check (and the Trainer's ``dtype=`` cast, and a sync)
    replaces ``p.value``, and was told only "numeric 0". Where it stays then too, the output
    does not depend on the parameter at all there (a ReLU dead everywhere): asked whether it
    kept an old array, a layer that read ``p.value`` and forgot the ReLU's mask was misled.
    Empty where ``f`` moves (a derivative of 0 at one entry of a parameter in use), and where
    the layer raises at the moved values."""
    if not isinstance(owner, Parameter):
        return ""
    v = owner.value
    try:
        owner.value = _moved(v)
        if obj.moved(obj.value()):
            return ""
        held = [v, *(a for a in obj.originals.get(id(owner), ()) if a is not v)]
        if any(obj.moved(_in_place(obj, a)) for a in held):
            return (
                f"; the output does not depend on {owner.name}'s current value (it stays when "
                "all of it moves, and moves when the array it held moves in place): does the "
                "layer keep an old array (self.w.value from __init__) instead of reading "
                "p.value in each forward and backward?"
            )
    except Exception:  # a layer that refuses the moved values: no verdict on the hint
        return ""
    finally:
        owner.value = v
    return (
        f"; the output does not depend on {owner.name} at all here (it stays when all of it "
        "moves, in place too: a unit dead everywhere, as a ReLU's, or inputs of 0?), yet "
        "backward gave it a gradient: does backward follow what forward used (a ReLU's mask)?"
    )


def _moved(v: Any) -> Any:
    """``v`` with every entry moved by 1 or more, in its dtype."""
    return (v + 1 + abs(v)).astype(v.dtype)


def _in_place(obj: Any, a: Any) -> float:
    """``f`` with every entry of the array ``a`` moved in place, its entries put back after."""
    saved = a.copy()
    try:
        a[...] = _moved(saved)
        return obj.value()
    finally:
        a[...] = saved
