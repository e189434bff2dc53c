"""A strategy's fired gradients, held read-only from their callback until its step ends.

The sync contract (``distconv/sync/base.py``) gives ``param.grad`` to the strategy from its
callback until ``finish_step``: MPISync reduces it in place, on the wire, while the rest of
backward runs; a parameter server pushes it; LocalSync has applied and zeroed it. A write in
that window (a clip by hand between ``backward`` and ``finish_step``, where a PyTorch loop puts
one, or a ``net.zero_grad()``) was ignored by one transport, applied by another, and under
two-rank MPI raced the reduction, so the ranks' weights drifted apart without a word.

So, for a strategy whose class promises that nothing of its own writes through a fired
gradient's array (:func:`~distconv.fired_writes.promises_untouched`: the shipped three),
:class:`~distconv.firing.Firing` hands every fired numpy gradient, read-only, to the strategy's
hold (:func:`step_hold`), on every pass that fires to it. The hold lets go as the step ends:
when ``finish_step`` or ``abandon_step`` begins (the strategy's own writes, zeroing the
gradients, come after), at a ``setup`` and at ``close``. A write in the window raises numpy's
"read-only" ValueError at the line that wrote; the sync's close, where that error propagates
(a ``with`` block's end, a ``finally: sync.close()``), raises :func:`blamed_write`'s
:class:`SyncError` from it, naming the parameter and the supported route. A ``zero_grad`` there
is refused at once, in words of its own (:func:`refuse_zeroing`), which the close raises as
they are: nothing was written, and under MPI that refusal is the rank's one line.

Not held: the passes of a gradient accumulation before its last (their callback is the
Trainer's ``keep_gradient``: the next pass adds into the same gradients), and a device (cupy)
gradient, which has no writeable flag: a write into one in the window goes unnoticed.
"""

from __future__ import annotations

from typing import Any

from distconv.fired_writes import (
    NAMED,
    WriteGuard,
    holding,
    named_write,
    promises_untouched,
    strategy_of,
)
from distconv.parameter import Parameter, UpdateCallback, keep_gradient
from distconv.short_lists import short_list
from distconv.sync.errors import SyncError

#: the attribute of a strategy that holds its step's read-only gradients (made on first use)
_HOLD = "_fired_gradients_held"


def step_hold(callback: UpdateCallback) -> WriteGuard | None:
    """The hold that keeps the gradients fired to ``callback`` read-only until the step ends:
    that of the strategy it is (or whose ``on_gradient`` it is), where that strategy's class
    promises them untouched; None for any other callback (``keep_gradient``: the next pass of
    an accumulation adds into them)."""
    if callback is keep_gradient or not promises_untouched(callback):
        return None
    strategy = strategy_of(callback)
    hold = strategy.__dict__.get(_HOLD)
    if hold is None:
        hold = strategy.__dict__[_HOLD] = WriteGuard(type(strategy).__name__)
    return hold


def release_held(sync: Any) -> None:
    """Make the gradients ``sync`` holds writable again: its step ends (or a setup, a close)."""
    hold = sync.__dict__.get(_HOLD)
    if hold is not None:
        hold.release()


def blamed_write(sync: Any, error: BaseException | None) -> SyncError | None:
    """The :class:`SyncError` that ``error`` is, where it is a write into a gradient ``sync``
    holds (numpy's "read-only", at the user's line); None otherwise. Asked before the hold lets
    go: it names the parameters it holds."""
    hold = sync.__dict__.get(_HOLD)
    named = [] if hold is None else hold.written(error)
    if not named:
        return None
    which = short_list([repr(p.name) for p in named], NAMED, separator=" or ", bracketed=True)
    owner = type(sync).__name__
    return SyncError(
        f"the gradient of {which} was written after it fired and before "
        f"{owner}.finish_step() (a clip, a scale or a zero_grad between backward and "
        f"finish_step): from its callback until finish_step the gradient is the sync's, on "
        f"the wire or applied already, and such a write was lost, applied, or raced the "
        f"reduction, depending on the transport. Change gradients inside the strategy: "
        f"MPISync(grad_hook=...) runs between the reduction and the update, and a subclass of "
        f"LocalSync can change each in on_gradient (examples/own_sync.py)"
    )


def refuse_zeroing(param: Parameter, error: ValueError) -> None:
    """Raise a :class:`SyncError` from ``error``, numpy's "read-only" at ``param.zero_grad()``,
    where a step hold keeps ``param``'s gradient: a PyTorch-style ``net.zero_grad()`` after a
    step that never ended (a backward that raised, a Ctrl-C), on the sync that holds it. Return
    where none does (another read-only array: numpy's error stands). A sync that closes on it
    raises it as it is (:func:`~distconv.fired_writes.named_write`), not
    :func:`blamed_write`'s words, which said the write "was lost, applied, or raced the
    reduction": it was refused, and nothing was written."""
    hold = holding(param)
    if hold is None:
        return
    owner = hold.owner or "the sync"
    refusal = SyncError(
        f"zero_grad of {param.name!r}: its gradient is read-only, fired to {owner} in a step "
        f"that is unfinished, and the sync's until that step ends (on the wire, or applied): call "
        f"{owner}.finish_step() first, or {owner}.abandon_step() where the step raised"
    )
    raise named_write(refusal) from error
