"""A sync's refusals (:class:`SyncError`, a gradient out of the step's order) and whether it
closes on a failure: what a transport tells its peers as it closes."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from distconv import stop_request
from distconv.stop_request import Preempted


class SyncError(RuntimeError):
    """Ranks disagree, a peer is gone, or the strategy was used out of order.

    The message names the cause: the first field that differs between ranks, the rank that
    stopped answering, or the call that came too early."""


def step_refusal(
    name: str,
    in_step: bool,
    known: bool = True,
    twice_in: str = "one step",
    whose: str = "",
    closed: bool = False,
) -> SyncError:
    """Why the gradient of parameter ``name`` is refused, in the words of every transport that
    checks the step's order: after ``close()`` (``closed``), outside a step, not given to setup
    (``known`` False; ``whose`` may add whose it was), or fired twice in ``twice_in``
    (``"one step"``, ``"step 3"``)."""
    if closed:  # "call start_step" would send the reader to a call the closed sync refuses
        return SyncError(f"gradient of {name!r} arrived after close(): make a new sync to go on")
    if not in_step:
        hint = "call start_step(examples) before backward, finish_step() after it"
        return SyncError(f"gradient of {name!r} arrived outside a step: {hint}")
    if not known:
        return SyncError(f"gradient of {name!r}, which was not given to setup{whose}")
    return SyncError(f"parameter {name!r} fired twice in {twice_in}")


def closing_error() -> BaseException | None:
    """The exception propagating while a sync closes (from a ``finally``; one being handled in
    an ``except`` clause counts too), or None, as for ``sys.exit(0)``: a clean end. So is a
    stop by signal (:class:`~distconv.stop_request.Preempted`) where ``run_main`` ends the
    script on it (:data:`~distconv.stop_request.preempted_ends_run`): every rank raises it at
    the step they agreed on; a script's ``try: fit() finally: sync.close()`` aborted the MPI
    job there, with every rank's traceback."""
    error = sys.exc_info()[1]
    clean_exit = isinstance(error, SystemExit) and error.code in (0, None)
    if clean_exit or (isinstance(error, Preempted) and stop_request.preempted_ends_run):
        return None
    return error


def guarded(
    method: Callable[..., Any], check: Callable[[Any, str], None], name: str
) -> Callable[..., Any]:
    """``method``, the class's ``name`` (its own name may differ: ``barrier = _wait``), which
    first has ``check(self, name)`` refuse the call where it must (a closed strategy, one whose
    base ``__init__`` never ran), by raising."""

    @functools.wraps(method)
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        check(self, name)
        return method(self, *args, **kwargs)

    checked._guarded = True  # type: ignore[attr-defined]
    return checked


def closes_once(
    close: Callable[[Any], None], unmade: Callable[[Any], bool]
) -> Callable[[Any], None]:
    """``close``, which runs once: closing again does nothing. On an object ``unmade`` says
    its base ``__init__`` never ran on, there is nothing to let go: it raises that clear error
    (``check_made``'s) where nothing else propagates, and does nothing where something does
    (``try: sync.setup() finally: sync.close()``: setup's TypeError goes on, not masked by an
    AttributeError on a field the base's ``__init__`` sets). A clean end propagating counts
    too (``sys.exit(0)``, which :func:`closing_error` calls none): it ended in the TypeError."""

    @functools.wraps(close)
    def once(self: Any) -> None:
        if self.closed:  # a script's own close, then the one in its finally
            return
        if unmade(self):
            if sys.exc_info()[1] is None:
                self.check_made()
            return
        try:
            close(self)
        finally:  # only now: a subclass's close calling super().close() runs both
            self.closed = True

    once._guarded = True  # type: ignore[attr-defined]
    return once


def unmade(sync: Any) -> bool:
    """Whether the base's ``__init__`` never ran on ``sync`` (its marker, as ``check_made``)."""
    return "_examples" not in sync.__dict__


def refuse_unmade(sync: Any, call: str) -> None:
    """``check_made``'s TypeError where a transport's own fields were never set: a dataclass
    strategy's ``start_step`` failed on "'Quiet' object has no attribute '_fired'"."""
    if unmade(sync):
        sync.check_made()


def refuse_closed(sync: Any, call: str) -> None:
    """A :class:`SyncError` naming ``call`` on a closed ``sync``; an unmade one's TypeError."""
    if sync.closed:
        raise SyncError(
            f"{type(sync).__name__}.{call}() called after close(): make a new "
            "sync to go on (evaluate and save state before closing)"
        )
    refuse_unmade(sync, call)


def ends_step(method: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``finish_step`` or ``abandon_step``, which ends the step for ``check_gradient`` once
    its body returned or raised, not before: a strategy's ``finish_step`` that hands itself
    the gradients no backward fired (zeros, through its ``on_gradient``) is still in the step,
    and so is a subclass's after its ``super().finish_step()`` (the outermost call ends it).
    A closed sync's ``finish_step`` is refused, as :func:`refuse_closed` says; ``abandon_step``
    is not, whatever its function's own name (``abandon_step = _drop``)."""

    @functools.wraps(method)
    def ending(self: Any, *args: Any, **kwargs: Any) -> Any:
        # the outermost call ends the step: a subclass's, whose super().finish_step() is
        # wrapped too, may hand itself gradients after it (LocalSync's has nothing in flight)
        outermost = not self.__dict__.get("_ending", False)
        self._ending = True
        try:
            return method(self, *args, **kwargs)
        finally:
            if outermost:
                self._ending, self._taken = False, None

    check = refuse_unmade if name == "abandon_step" else refuse_closed
    return guarded(ending, check, name)
