"""Whether a sync closes on a failure (what a transport tells its peers as it closes), and the
guards every strategy's calls get from the base: a closed one refuses them, an unmade one is
told so, and ``finish_step``/``abandon_step`` end the step. :class:`SyncError` and the step's
refusals are :mod:`distconv.sync.errors`'s."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping
from typing import Any

from distconv import stop_request
from distconv.held_gradients import blamed_write, release_held
from distconv.parameter import Parameter
from distconv.stop_request import Preempted
from distconv.sync.closed_calls import closed_refusal
from distconv.sync.errors import SyncError, step_refusal
from distconv.sync.other_model import whose


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
        raised = closing_refusal(self)
        release_held(self)  # before the transport's close, which may zero them
        try:
            if raised is None:
                close(self)
            else:
                closes_on(self, close, raised)
        finally:  # only now: a subclass's close calling super().close() runs both
            self.closed = True
        if raised is not None:  # every resource let go: the caller's to report
            raise raised

    once._guarded = True  # type: ignore[attr-defined]
    return once


#: the way out of a step left open at close, in every transport's refusal of it
STEP_WAY_OUT = "call finish_step() before close(), or abandon_step() where the step raised"


def closed_mid(unfinished: str) -> str:
    """What a sync closed with ``unfinished`` open (a step, a setup) is told first."""
    return f"sync closed in the middle of {unfinished}"


def open_step(step: int) -> str:
    """A step left open, as a close names it (MPISync's ``_open`` says it in these words)."""
    return f"step {step} (no finish_step, or it failed)"


def meeting_refused(said: str, unfinished: str) -> SyncError:
    """The refusal of a meeting of the ranks (a metrics sum, the barrier) that this rank was
    asked for inside ``unfinished`` (a step left open, a setup that failed), ``said`` being
    what it was asked (``summing 3 values after 2 steps``): every transport's words, so a
    script that skipped ``finish_step`` hears the same on each."""
    return SyncError(f"{said}: the ranks meet between steps, not in {unfinished}")


def summing(count: int) -> str:
    """A sum of ``count`` values as a refused meeting names it: ``summing 3 values``."""
    return f"summing {count} value{'s' * (count != 1)}"


def after_steps(steps: int) -> str:
    """When a meeting came, as every transport says it: ``after 2 steps``."""
    return f"after {steps} step{'s' * (steps != 1)}"


def refuse_meeting_in_step(sync: Any, asked: str) -> None:
    """Refuse ``asked`` (``summing 3 values``, ``at the barrier``), a meeting of the ranks,
    where ``sync``'s step is open (no ``finish_step`` or ``abandon_step`` since its
    ``start_step``), before anything is sent: its metrics, and a checkpoint written after
    them, would be of a step half taken (its gradients fired, no update). A transport whose
    meetings do not check by themselves (MPISync's exchange does) calls it first.

    Raises:
        SyncError: :func:`meeting_refused`'s, naming the open step.
    """
    if sync.__dict__.get("_taken") is None:
        return
    steps = getattr(sync, "_step_number", 0)  # the step under way, after as many whole ones
    said = f"{asked} {after_steps(steps)}"
    raise meeting_refused(said, open_step(steps))


def step_left_open(error: BaseException | None) -> bool:
    """Whether ``error`` is :func:`closing_refusal`'s of a step left open with nothing
    propagating: the error a transport closes on, then raised (a plain SyncError, as every
    refusal of the contract is). A rank alone waits for nobody: MPISync's leaves as ever
    (completing the step's check) before it is raised."""
    return getattr(error, "_step_left_open", False)


def closing_refusal(sync: Any) -> BaseException | None:
    """What ``sync``'s close raises once it let go of everything, or None: a write into a
    gradient it held (:func:`~distconv.held_gradients.blamed_write`) propagating, or, with
    nothing propagating (not even a clean ``sys.exit``), a step left open (no ``finish_step``
    or ``abandon_step`` since its ``start_step``), which a parameter server and a single MPI
    rank dropped without a word,
    LocalSync had applied, and two MPI ranks aborted on: the same words on every transport."""
    error = closing_error()
    if error is not None:
        return blamed_write(sync, error) or kept_blame(sync, error)
    # a clean end propagating (sys.exit(0)) is no failure, but no less the script's own end:
    # not replaced by this refusal (status 1), nor told to peers as one
    if sys.exc_info()[1] is not None or sync.__dict__.get("_taken") is None:
        return None
    step = getattr(sync, "_step_number", 0)
    refusal = SyncError(f"{closed_mid(open_step(step))}: {STEP_WAY_OUT}")
    refusal._step_left_open = True  # type: ignore[attr-defined]
    return refusal


#: where :func:`let_go` keeps the refusal of a held-gradient write, with the write's error
BLAMED = "_blamed_write"


def let_go(sync: Any) -> None:
    """Release the gradients ``sync`` holds as its step ends, keeping first the refusal of a
    write into one of them where that write's error is being handled (the ``abandon_step`` in
    the step's ``except``): the close it propagates to raises it, as where none was called."""
    sync.__dict__.pop(BLAMED, None)  # an earlier step's, and the frames its error holds
    error = sys.exc_info()[1]
    if error is not None and (refusal := blamed_write(sync, error)) is not None:
        sync.__dict__[BLAMED] = (error, refusal)
    release_held(sync)


def kept_blame(sync: Any, error: BaseException) -> SyncError | None:
    """:func:`let_go`'s refusal, where ``error`` is (or was raised from) the write it kept."""
    kept = sync.__dict__.get(BLAMED)
    seen: set[int] = set()
    while kept is not None and error is not None and id(error) not in seen:
        if error is kept[0]:
            return kept[1]
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def closes_on(sync: Any, close: Callable[[Any], None], raised: BaseException) -> None:
    """Run ``close`` on ``sync`` with ``raised`` as the error it closes on
    (:func:`closing_error`): a transport tells its peers as for any failure (MPI aborts the
    job where other ranks may wait in the step; a parameter server's shards hear why)."""
    try:
        raise raised from closing_error()
    except type(raised):
        close(sync)


def unmade(sync: Any) -> bool:
    """Whether the base's ``__init__`` never ran on ``sync`` (its marker, as ``check_made``)."""
    return "_examples" not in sync.__dict__


def refuse_unmade(sync: Any, call: str) -> None:
    """``check_made``'s TypeError where a transport's own fields were never set: a dataclass
    LocalSync's ``start_step`` fails on "'Quiet' object has no attribute '_taken'" without it."""
    if unmade(sync):
        sync.check_made()


def refuse_closed(sync: Any, call: str) -> None:
    """A :class:`SyncError` naming ``call`` on a closed ``sync``; an unmade one's TypeError."""
    if sync.closed:
        raise closed_refusal(sync, call)
    refuse_unmade(sync, call)


#: the attribute in which ``setup``'s wrapper marks its outermost call under way, named as
#: SyncStrategy's private ``__setting_up``: a transport's ``super().setup()`` is nested in it
SETTING_UP = "_SyncStrategy__setting_up"


def in_setup(sync: Any) -> bool:
    """Whether ``sync``'s outermost ``setup`` is under way (:func:`sets_up`): a ``fail_setup``
    called now is its own (a transport's layout refused), not a fit's failed before it."""
    return sync.__dict__.get(SETTING_UP, False)


def mark_set_up(sync: Any) -> None:
    """Mark ``sync`` set up: its setup did its work, so ``start_step`` is let through. The
    outermost ``setup`` marks it as it returns (:func:`sets_up`); a transport whose setup
    completes and only then raises what it held back (MPISync's deferred Ctrl-C, raised once
    every rank set up alike, after which a script steps on) marks it where its work is done."""
    sync._setup_completed = True


def sets_up(method: Callable[..., Any]) -> Callable[..., Any]:
    """``setup``, guarded: refused on a closed sync (:func:`refuse_closed`). The outermost
    call clears the set-up mark, refuses a list holding anything but Parameters
    (:func:`parameters_only`; the other ranks are told: ``fail_setup``), and marks the sync
    set up only where it returns (:func:`mark_set_up`). A setup that raised lets no
    ``start_step`` through: one let through took the step and refused its first gradient as
    "not given to setup", as if the parameter list were wrong. A setup of one's own that
    skips the base's counts as much as the base's."""

    @functools.wraps(method)
    def setting_up(self: Any, params: Any, *args: Any, **kwargs: Any) -> Any:
        refuse_closed(self, "setup")
        if in_setup(self):  # a transport's super().setup(): its own
            return method(self, params, *args, **kwargs)  # stand-ins pass (MPISync's Raising)
        self._setup_called, self._setup_completed = True, False
        try:
            params = parameters_only(params)
        except Exception as exc:  # also a generator's own filter failing as it is listed:
            self.fail_setup(exc)  # every other rank waits in its setup for this one's: told
            raise
        setattr(self, SETTING_UP, True)
        try:
            result = method(self, params, *args, **kwargs)
        finally:
            setattr(self, SETTING_UP, False)
        mark_set_up(self)
        return result

    setting_up._guarded = True  # type: ignore[attr-defined]
    return setting_up


def parameters_only(params: Any) -> list[Any]:
    """``params`` as a list, where every item is a :class:`~distconv.parameter.Parameter`.

    Raises:
        TypeError: naming the first item that is not one (its position and type), or
            ``params`` itself where it is no sequence: a bare array failed deep inside
            (``'numpy.ndarray' object has no attribute 'static'``).
    """
    fix = "pass network.parameters() (a sync trains Parameters, not their arrays)"
    # an array's items are rows, a mapping's its keys, a string's its letters: none is a list
    one = isinstance(params, (Parameter, str, bytes, Mapping)) or hasattr(params, "dtype")
    if one or not hasattr(params, "__iter__"):
        raise TypeError(f"setup takes a list of Parameters, got {type(params).__name__}: {fix}")
    params = list(params)
    for position, p in enumerate(params):
        if not isinstance(p, Parameter):
            kind = f"{type(p).__module__}.{type(p).__qualname__}".removeprefix("builtins.")
            what = "None" if p is None else f"a {kind}"
            raise TypeError(f"setup: item {position} is {what}, not a Parameter: {fix}")
    return params


#: the attribute in which ``finish_step``'s wrapper marks its outermost call under way, named
#: as SyncStrategy's private ``__ending``: a subclass's own ``_ending`` is not it
ENDING = "_SyncStrategy__ending"


def clear_step_record(sync: Any) -> None:
    """What a setup (the base's, the parameter-server client's) makes of the step's record: a
    step left open is let go of (``check_gradient`` refuses its rest), and so is the list of
    the last model's parameters ``check_gradient`` kept (a model dropped from the sync is
    freed). The wrapper's flag is cleared, set where its finally never ran (a copy made inside
    a ``finish_step``): every ``finish_step`` or ``abandon_step`` after it was nested, and no
    step ended."""
    sync._taken, sync._known, sync._taken_unfinished = None, ([], set()), None
    setattr(sync, ENDING, False)
    release_held(sync)


def take_gradient(sync: Any, param: Any) -> None:
    """``SyncStrategy.check_gradient``'s work (its docstring says the rules): take ``param``'s
    gradient into the step's record, or raise the SyncError naming why it is refused."""
    try:
        params, known = sync._known
    except AttributeError:
        sync.check_made()  # a @dataclass one's: not "no attribute '_known'"
        raise
    if params is not sync.params:  # a setup since: its list, made anew
        params, known = sync.params, {id(p) for p in sync.params}
        sync._known = params, known
    taken, key = sync._taken, id(param)
    if sync.closed or taken is None or key in taken or key not in known:
        in_step = taken is not None and not sync.closed
        twice = in_step and key in taken  # type: ignore[operator]
        raise step_refusal(
            param.name,
            in_step,
            twice or key in known,
            "one step",
            whose(param, params),
            closed=sync.closed,
        )
    taken.add(key)


def ends_step(method: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``finish_step`` or ``abandon_step``, which ends the step for ``check_gradient`` once
    its body returned or raised, not before: a strategy's ``finish_step`` that hands itself
    the gradients no backward fired (zeros, through its ``on_gradient``) is still in the step,
    and so is a subclass's after its ``super().finish_step()`` (the outermost call ends it).
    One that raised keeps what the step took as ``_taken_unfinished`` until the next call that
    ends or starts a step: the ``abandon_step`` the Trainer calls then (LocalSync's asks
    whether the step was applied in part) reads it, though ``check_gradient`` refuses now; an
    ``abandon_step`` that raised (a subclass's, before LocalSync's asked) keeps it too.
    A closed sync's ``finish_step`` is refused, as :func:`refuse_closed` says; ``abandon_step``
    is not, whatever its function's own name (``abandon_step = _drop``)."""

    @functools.wraps(method)
    def ending(self: Any, *args: Any, **kwargs: Any) -> Any:
        # the outermost call ends the step: a subclass's, whose super().finish_step() is
        # wrapped too, may hand itself gradients after it (LocalSync's has nothing in flight)
        outermost = not self.__dict__.get(ENDING, False)
        setattr(self, ENDING, True)
        if outermost:  # the gradients are the strategy's again, to apply and zero
            let_go(self)
        raised = True
        try:
            result = method(self, *args, **kwargs)
            raised = False
            return result
        finally:
            if outermost:  # one that raised: what the step took, for the abandon_step after
                # (one refused for want of a step keeps what an earlier one that raised kept)
                taken = self._taken if self._taken is not None else self._taken_unfinished
                unfinished = taken if raised else None
                self._taken, self._taken_unfinished = None, unfinished
                setattr(self, ENDING, False)

    check = refuse_unmade if name == "abandon_step" else refuse_closed
    return guarded(ending, check, name)


#: the calls a closed strategy refuses: each would use what ``SyncStrategy.close`` let go
#: (sockets, communicators, the watchdog) or train on without the peers that left.
#: ``on_gradient`` is not among them: it runs per gradient, inside a step that ``start_step``
#: already refused, or that ``close`` ended.
NEEDS_OPEN: tuple[str, ...] = tuple(
    "setup broadcast_parameters start_step prefetch finish_step state_dict load_state_dict "
    "refresh_parameters checkpoint_state save_remote_parts allreduce_sum barrier all_equal".split()
)


def guard_closing(cls: Any) -> None:
    """Wrap the ``close``, ``abandon_step``, :data:`NEEDS_OPEN` and ``cls.also_needs_open`` of
    ``cls``, a :class:`~distconv.sync.base.SyncStrategy` (its ``__init_subclass__`` calls
    this), where not wrapped yet: those it defines, or takes from a mixin (the parameter
    server's)."""
    for name in ("abandon_step", *NEEDS_OPEN, *cls.also_needs_open):
        method = getattr(cls, name)
        if not getattr(method, "_guarded", False):
            ends = name in ("abandon_step", "finish_step")  # they end the step: _taken
            if name == "setup":
                wrap = sets_up(method)
            else:
                wrap = ends_step(method, name) if ends else guarded(method, refuse_closed, name)
            setattr(cls, name, wrap)
    if not getattr(cls.close, "_guarded", False):
        cls.close = closes_once(cls.close, unmade)  # type: ignore[method-assign]
