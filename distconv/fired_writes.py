"""A layer that adds into a parameter's gradient after firing it, caught as it writes.

Once a parameter fires, its gradient is the sync's (``distconv/sync/base.py``): LocalSync has
applied and zeroed it, MPISync may have put it on the wire, a parameter server reads it at
``finish_step``. A share added after is lost on one transport, kept on another, or left for
the next step, and each said something else or nothing. So, on the pass that records the
firing order (the first), each fired gradient is made read-only until the backward of the
layer that fired it returns: the layer's ``+=`` then raises where it is written, and
:meth:`WriteGuard.blame` turns numpy's "output array is read-only" into the network's error,
naming the layer and the parameter.

Not a copy compared afterwards: MPISync reduces a bucket in place, its thread or its next
fire completing the reduction while the layer still runs, so a correct layer's gradient
changes there too. The flag is on the gradient's own array object: MPI, and MPISync's thread,
write into the bucket's buffer beneath it, and LocalSync and the parameter server write
only inside the callback (before the guard) or at ``finish_step`` (after it). A callback of
one's own may hand the gradient to a thread that writes through that very object while
backward runs, as the contract lets it: only a strategy that says it does not is guarded
(:func:`promises_untouched`).
A gradient that is no numpy array (a device array) has no such flag and is not guarded.

A strategy that promises it is guarded on every pass, and its gradients stay read-only past
the layer, until its step ends: :mod:`distconv.held_gradients` (:meth:`WriteGuard.hand_to`).
A step that never ends (a Ctrl-C mid-step, its sync dropped unclosed) lets go of them as
another step over the same parameters starts (:func:`let_go_of`).
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Callable, Iterable
from types import MethodType
from typing import Any, TypeVar

import numpy as np

from distconv.layers.source_spans import (
    failing_calls,
    failing_span,
    frame_names,
    resolve,
    touches_grad_of,
    written_target,
)
from distconv.parameter import Parameter, UpdateCallback, keep_gradient
from distconv.short_lists import short_list


def promises_untouched(owner: UpdateCallback | object) -> bool:
    """Whether a pass may guard the gradients it fires to ``owner``, a callback or a strategy
    (the Network asks of its callback, the step guard of the strategy): the Trainer's
    ``keep_gradient``, or a strategy (itself, or its bound ``on_gradient``) whose class says
    in its own body ``fired_gradients_untouched = True``: nothing of it writes through a
    fired gradient's own array until ``finish_step`` (the shipped three). Read on the class
    itself, never inherited: a subclass may add a thread that does, so one that keeps the
    promise says so again."""
    if owner is keep_gradient:
        return True
    return vars(type(strategy_of(owner))).get("fired_gradients_untouched") is True


def strategy_of(owner: UpdateCallback | object) -> object:
    """The strategy ``owner`` is: the object of a bound method (``sync.on_gradient``, which
    the Trainer hands over), else ``owner`` itself."""
    return owner.__self__ if type(owner) is MethodType else owner


#: how many parameters a refusal of a write into held gradients names before it counts the rest
NAMED = 3

#: the step holds (:meth:`WriteGuard.hand_to`'s ``other``) holding gradients now: empty
#: between steps, but for a step that never ended (:func:`let_go_of`)
_HOLDING: weakref.WeakSet[WriteGuard] = weakref.WeakSet()


def let_go_of(params: Iterable[Parameter]) -> None:
    """Make the gradients of ``params`` writable where a step hold still keeps them: the step
    of a sync that never ended it (a Ctrl-C mid-step, then a new sync made for the model).
    Another step over them begins: that one is dead. Nothing to do between steps."""
    if not _HOLDING:
        return
    ids = {id(p) for p in params}
    for hold in list(_HOLDING):
        ours = [(p, g) for p, g in hold._held if id(p) in ids]
        for _, grad in ours:
            grad.flags.writeable = True
        hold._held = [held for held in hold._held if id(held[0]) not in ids]
        if not hold._held:
            _HOLDING.discard(hold)


def holding(param: Parameter) -> WriteGuard | None:
    """The step hold that keeps ``param``'s gradient read-only, or None: asked only where a
    write into it failed (:meth:`~distconv.parameter.Parameter.zero_grad`)."""
    return next((h for h in list(_HOLDING) if any(p is param for p, _ in h._held)), None)


class WriteGuard:
    """The gradients fired in the backward of the layer that runs now, each made read-only."""

    def __init__(self, owner: str = "") -> None:
        self._held: list[tuple[Parameter, np.ndarray]] = []
        self._step = False  # a step's hold (in _HOLDING while it holds)
        #: the class name of the strategy whose step hold this is (a refusal names it)
        self.owner = owner

    def hold(self, p: Parameter) -> None:
        """Make ``p``'s gradient read-only, once its callback returned (a sync may have given it
        another array there: MPISync's bucket view)."""
        grad = p.grad
        if isinstance(grad, np.ndarray) and grad.flags.writeable:  # one read-only stays so
            grad.flags.writeable = False
            self._held.append((p, grad))

    def release(self) -> None:
        """Make every held gradient writable again: the layer's backward returned or raised."""
        for _, grad in self._held:
            grad.flags.writeable = True
        self._held.clear()
        if self._step:
            _HOLDING.discard(self)

    def hand_to(self, other: WriteGuard) -> None:
        """Leave every held gradient read-only, held by ``other`` from now on (the step's hold
        of a strategy that keeps them until its step ends: :mod:`distconv.held_gradients`)."""
        if self._held:
            other._held += self._held
            self._held.clear()
            other._step = True
            _HOLDING.add(other)

    def written(self, exc: BaseException | None) -> list[Parameter]:
        """The held parameters whose gradient ``exc`` wrote into (numpy's "read-only" error,
        or one raised from it); none where ``exc`` is no such write."""
        cause = None if exc is None else _read_only_write(exc)
        if cause is None or not self._held:
            return []
        params = [p for p, _ in self._held]
        # the arrays the failing lines write into, where they resolve, decide: a line may read
        # a fired gradient (allowed) while it writes into another read-only array
        written, unread = _written_arrays(cause)
        if written:
            return self._sharing(written)
        touched = touches_grad_of(cause, params)
        if touched is None:  # a line wrote a gradient whose owner it does not say: any fired
            return params
        if touched:
            return [p for p in params if touches_grad_of(cause, [p])]
        # compiled code a line calls (a Cython kernel) may write into any array it is given
        if named := self._sharing(_passed_arrays(cause)):
            return named
        # a read line writes what the guard cannot read (a property's array): any fired one;
        # where no line read says (exec'd code), not guessed at: the layer's own error stands
        return params if unread else []

    def _sharing(self, arrays: list[np.ndarray]) -> list[Parameter]:
        """The held parameters whose gradient shares memory with one of ``arrays``."""
        return [p for p, g in self._held if any(np.may_share_memory(a, g) for a in arrays)]

    def blame(self, exc: BaseException, layer: str, error: Callable[[str], Exception]) -> None:
        """Raise ``error`` from ``exc``, which the backward of ``layer`` raised, where it is a
        write into a held gradient (numpy's "read-only"); return otherwise (another read-only
        array's: the layer's own error stands)."""
        named = self.written(exc)
        if not named:
            return
        which = short_list([repr(p.name) for p in named], NAMED, separator=" or ", bracketed=True)
        blamed = error(
            f"layer {layer!r} wrote into the gradient of {which} after firing it "
            f"(p.inc_update(callback) called before the layer's share was added): from its "
            f"callback on, the gradient is the sync's (applied, or on the wire), so a share "
            f"added after is lost or left for the next step. A parameter "
            f"fires once per pass, after its last user: add into p.grad first, then call "
            f"p.inc_update(callback)"
        )
        raise named_write(blamed) from exc  # the sync's close keeps it: it names the layer


_E = TypeVar("_E", bound=BaseException)

#: marks an error that already says what became of a write into a held gradient: a sync
#: closing on it (:func:`distconv.held_gradients.blamed_write`) must not replace it with its
#: own words of a write between backward and finish_step
_WRITE_NAMED = "_distconv_write_named"


def named_write(error: _E) -> _E:
    """``error``, marked as the one that names a write into a held gradient and what became
    of it (:meth:`WriteGuard.blame`'s, naming the layer; a refused ``zero_grad``'s, naming the
    step that holds it): a sync closing on it raises it as it is. Returns ``error``."""
    setattr(error, _WRITE_NAMED, True)
    return error


def _read_only_write(exc: BaseException) -> BaseException | None:
    """numpy's error for a write into a read-only array: ``exc`` or the innermost one it was
    raised from (a layer's backward names its ValueErrors in a LayerError, which chains the
    original, the one raised at the layer's line); None where there is none. The chain's walk
    stops at an error that already named the write (:func:`named_write`): a write
    into a held gradient while that one was handled (a clip or a zero_grad in the ``except``)
    is still the user's own, and found."""
    found, seen = None, set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if getattr(exc, _WRITE_NAMED, False):  # named already (a layer's, a zero_grad's)
            return found
        if isinstance(exc, ValueError) and "read-only" in str(exc):
            found = exc
        exc = exc.__cause__ or exc.__context__
    return found


def _written_arrays(exc: BaseException) -> tuple[list[np.ndarray], bool]:
    """The numpy arrays the lines ``exc`` passed through write into, where they can be read:
    an augmented assignment's target, a call's ``out=``, a slice assigned to (``a[...] =``),
    what a call writes into (:func:`_called_targets`); and whether a line read writes into
    what cannot be read without running code (a property's array, an object's own item)."""
    found, unread, tb = [], False, exc.__traceback__
    while tb is not None:
        node = failing_span(tb)
        names = frame_names(tb, node)
        tb_globals, tb = tb.tb_frame.f_globals, tb.tb_next
        if node is None:
            continue
        called = _called_targets(node, {**tb_globals, **names})  # np.negative: a module's
        targets = [written_target(node), *called]
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Subscript):
            targets.append(node.value.value)  # ``a[...] = v`` fails storing into ``a[...]``
        elif isinstance(node, ast.Assign):
            targets += [t.value for t in node.targets if isinstance(t, ast.Subscript)]
        for target in targets:
            if target is not None:
                value = resolve(target, names)
                if isinstance(value, np.ndarray):
                    found.append(value)
                unread = unread or value is None
    return found, unread


def _passed_arrays(exc: BaseException) -> list[np.ndarray]:
    """The numpy arrays the lines ``exc`` passed through hand to a call, as an argument or a
    keyword's value, where they can be read: what compiled code the guard cannot read (a
    Cython kernel, which raises "read-only" for a buffer it may write) may have written."""
    found, tb = [], exc.__traceback__
    while tb is not None:
        node = failing_span(tb)
        names = frame_names(tb, node)
        names, tb = {**tb.tb_frame.f_globals, **names}, tb.tb_next
        calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)] if node is not None else []
        for call in calls:
            for arg in [*call.args, *(k.value for k in call.keywords)]:
                value = resolve(arg, names)
                if isinstance(value, np.ndarray):
                    found.append(value)
    return found


#: numpy's functions that write into their first argument, and an array's methods that
#: write into the array itself: what a failing line writes, besides ``out=`` and assignments
_FIRST_ARGUMENT_WRITERS = frozenset({"copyto", "put", "place", "putmask", "fill_diagonal"})
_IN_PLACE_METHODS = frozenset({"fill", "sort", "put", "partition", "resize", "setfield", "itemset"})


def _called_targets(node: ast.stmt, names: dict[str, Any]) -> list[ast.expr]:
    """What the calls ``node`` makes (:func:`failing_calls`) write into: ``np.copyto(a, ...)``'s
    ``a`` (and the like), ``a.fill(...)``'s ``a`` (and the like), a ufunc's outputs given by
    position (``np.negative(x, a)``); none for other calls."""
    return [target for call in failing_calls(node) for target in _call_targets(call, names)]


def _call_targets(call: ast.Call, names: dict[str, Any]) -> list[ast.expr]:
    """What ``call`` writes into, as :func:`_called_targets` reads it."""
    func = call.func
    ufunc = resolve(func, names)
    found = list(call.args[ufunc.nin :]) if isinstance(ufunc, np.ufunc) else []
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name in _FIRST_ARGUMENT_WRITERS and call.args:
        found.append(call.args[0])
    if isinstance(func, ast.Attribute) and name in _IN_PLACE_METHODS:
        found.append(func.value)
    return found
