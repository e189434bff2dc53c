"""A Ctrl-C held back while the main thread starts a collective and records it.

A KeyboardInterrupt raised between a non-blocking collective's start returning and its request
being stored (or a piece being counted as handed to the communication thread) loses track of
a collective the other ranks match: made again, the start puts one more collective on this
rank alone; not made again, the others wait for it. Either way the step could only end in an
abort. :class:`HeldInterrupt` runs that stretch with a SIGINT handler of its own that notes
the signal, then puts the previous handler back and calls it, so the interrupt is raised once
the start is recorded, where the step's waits keep it (``to_the_end``) or its flags say it.

Not a signal mask (``pthread_sigmask``): a process-directed SIGINT (a terminal's Ctrl-C,
``mpiexec``'s forward) that the main thread blocks is delivered to another thread that does
not (the communication thread, the watchdog's, a BLAS or MPI thread), whose C handler marks it
for the main thread, which raises it at its next check, inside the stretch; only every thread
of the process blocking SIGINT would close it. Python runs a SIGINT's handler on the main
thread alone, whichever thread the signal reached, so swapping the handler closes it.
"""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import Any

try:  # the C functions: signal's Python wrappers turn a Python handler into an enum by a
    # ValueError raised and caught, ten times the cost of the call (3 us against 0.3 us)
    import _signal as _sig
except ImportError:  # pragma: no cover - CPython has it; another Python, the wrappers
    import signal as _sig

SIGINT = int(_sig.SIGINT)


class HeldInterrupt:
    """A reusable context manager: inside it, on the main thread, a SIGINT whose handler is a
    Python function (Python's own, raising KeyboardInterrupt, or ``distconv.stop_request``'s)
    is noted, not handled; on leaving, that handler is put back and called once for each that
    came (it raises there, once the body's work is recorded). Elsewhere (another thread, where
    Python raises no KeyboardInterrupt; SIGINT ignored or left to the system) it does nothing.
    Not reentrant: one stretch at a time, as the main thread starts one collective at a time.
    About 1 us a stretch (two ``sigaction`` calls), a piece's start. ``signum``: the signal
    held (SIGINT by default; SIGTERM, for a stretch that must end alike however the job is
    asked to stop: close's last exchange, ``clean_leave._leave``), one an instance.

    Another signal's handler that raises as the stretch ends, before ``__exit__`` could run a
    line, leaves the noting handler in place: the next SIGINT, seeing no stretch under way in
    its frames (the stretch's frame was left by that error), puts the previous one back and is
    handled by it; a stretch begun meanwhile takes it back at once. ``signal.getsignal``
    names the noting handler until then.
    """

    __slots__ = ("_came", "_main", "_owner", "_previous", "_signum")

    def __init__(self, signum: int = SIGINT) -> None:
        self._signum = signum
        self._main = threading.main_thread().ident
        self._previous: Any = None
        self._came: list[FrameType | None] = []  # the frames SIGINTs came at, in order
        self._owner: FrameType | None = None  # the frame the stretch runs in

    def __enter__(self, owner: FrameType | None = None) -> None:
        """``owner``: the frame that runs the stretch to its end, where it is begun and left in
        functions that frame calls (:func:`~.updates.reduce_all`'s 16-bit buckets); by default
        the caller's."""
        if threading.get_ident() != self._main:
            return
        previous = _sig.getsignal(self._signum)
        if getattr(previous, "__self__", None) is self:  # ours, left by an error (see _note)
            previous = self._previous
        else:
            self._came = []
        if callable(previous):  # SIG_IGN, SIG_DFL or none from Python: nothing raised here
            self._previous = previous  # before the swap, as the stretch's frame
            self._owner = sys._getframe(1) if owner is None else owner
            try:
                _sig.signal(self._signum, self._note)  # a Ctrl-C before this: raised here
            except BaseException:  # another handler's (a SIGTERM's SystemExit): no body, no exit
                self.__exit__()
                raise

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self._came.append(frame)  # each one: a second Ctrl-C may mean "stop now" (stop_request)
        while frame is not None and frame is not self._owner:
            frame = frame.f_back
        if frame is None:  # no stretch runs: another handler raised as __exit__ began (its
            self.__exit__()  # first instruction runs them), so ours stayed: handled now

    def __exit__(self, *exc: object) -> None:
        if self._previous is None:
            return
        raised: BaseException | None = None
        while True:  # the previous handler back, whatever another handler raises meanwhile:
            try:  # signal first runs pending handlers (raising there, it swaps nothing), and
                # Python runs them as it returns; left as ours, every later Ctrl-C is lost
                _sig.signal(self._signum, self._previous)
                break
            except BaseException as error:  # made again: those handlers ran
                raised = raised or error
        previous, came, self._came, self._previous = self._previous, self._came, [], None
        self._owner = None
        try:  # such an error (a SIGTERM's SystemExit, a timer's) raised, yet each Ctrl-C that
            if raised is not None:  # came is still handed on: a KeyboardInterrupt wins, that
                raise raised  # error its context; stop_request's first only notes it
        finally:
            for frame in came:  # those that came inside: handled now, each as it would have been
                previous(self._signum, frame)
