"""The stop signals that came to the launcher's supervisor, in the order they came.

Python runs its signal handlers in the main thread between bytecodes, and where more than one
signal came before it could (the main thread in a C call, or on another core: a SIGTERM sent
just before a SIGINT), it runs them in signal-number order: SIGINT (2) before SIGTERM (15),
whatever came first. The launcher, which exits ``128 +`` the first signal, then exited 130
where the first had been SIGTERM (143). The C-level handler writes each signal's number to the
wakeup descriptor (:func:`signal.set_wakeup_fd`) as it arrives, so that pipe holds the true
order: :meth:`Arrivals.signals` reads it.

The order is the order the C-level handlers ran in, and the kernel hands a signal sent to the
process to any thread that does not block it: a SIGINT taken by the main thread and a SIGTERM
sent just after it, taken by a pump's thread, raced to write the pipe. So the threads the
supervisor starts block the stop signals (:func:`deaf`, :func:`deaf_thread`), and the main
thread takes each as it comes. Two signals that come while it cannot take them are still its
kernel's to order, lowest number first: while it does not run at all (within microseconds),
and while it starts a child (:func:`deaf`: milliseconds, more on a loaded host). Each one's
handler holds the others off till it has written (:mod:`launcher.handler_mask`): one the kernel
handed over is read before any that comes after it, which otherwise ran its handler on top of
the first's and wrote first.

It is read by the supervisor's own code, never by a handler: a handler runs inside any call of
another one (a second signal's, in the first's), so one that read the pipe and then recorded
what it read could record after the handler nested in it, which read the later signal.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from distconv.restorable import restorable

from .handler_mask import hold_each_other
from .interrupt import STOP_SIGNALS, stop_signals_to_catch, taken_over
from .second_signal import Caught, caught, repeated, stop_now

#: bytes read from the wakeup pipe at once (one a signal)
_READ = 256


def deaf_thread() -> None:
    """Block the stop signals in the calling thread, one of the launcher's own (not the main
    thread): the kernel gives them to the main thread, in the order they come."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


@contextmanager
def deaf() -> Iterator[None]:
    """The threads started within the block (a child's pump and waiter) take no stop signal:
    the main thread blocks them meanwhile, and a thread starts with its starter's mask. A
    child started within unblocks them again before its program runs
    (:func:`launcher.process_group.parent_death_signal`); a signal that comes meanwhile is
    taken at the block's end."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


class Arrivals:
    """The launcher's stop signals, caught by :meth:`catch`'s handlers, in arrival order; each
    also stamped as its handler took it, for whether a later one asks to stop now or repeats
    the first stop (:meth:`stop_now`, :meth:`repeat_to_say`)."""

    def __init__(self) -> None:
        self._caught: list[int] = []  # by the handlers, in the order Python ran them
        self._order: list[int] = []  # read from the wakeup pipe: the order they came
        self._stamped: list[Caught] = []  # each as its handler took it: when, a Ctrl-C or not
        self._repeat_said = False  # a repeat of the first stop (repeat_to_say) was said
        self._lock = threading.Lock()  # one reader of the pipe at a time
        self._pipe: tuple[int, int] | None = None
        self._wakeup = -1  # the wakeup descriptor :meth:`catch` found, given back
        #: monotonic time of the first signal (inf before one)
        self.first_at = float("inf")

    def on_signal(self, signum: int, _frame: object) -> None:
        """The handler of the stop signals (:meth:`catch`)."""
        self._caught.append(signum)  # first: a second one's handler runs inside any call here
        at = time.monotonic()
        self.first_at = min(self.first_at, at)
        self._stamped.append(caught(signum, at))

    def catch(self) -> dict[int, object]:
        """Set :meth:`on_signal` on the stop signals the launcher handles (a SIGINT or SIGHUP
        it was started ignoring stays ignored: :func:`stop_signals_to_catch`) and the wakeup
        pipe that keeps their order; main thread only (elsewhere none is set: {}, the caller
        forwards the signals). Returns the handlers replaced, for :meth:`give_back`."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        read, write = os.pipe()  # close-on-exec already (os.pipe2: none on macOS)
        self._pipe = (read, write)
        for fd in self._pipe:  # set_wakeup_fd's is non-blocking, and the reads must not block
            os.set_blocking(fd, False)
        self._wakeup = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        caught = stop_signals_to_catch()
        previous = {signum: signal.signal(signum, self.on_signal) for signum in caught}
        hold_each_other(caught)  # one handler's write at a time: the pipe in the kernel's order
        taken_over()  # what run() gives back at the end no longer raises
        return previous

    def give_back(self, previous: dict[int, object]) -> None:
        """The handlers :meth:`catch` replaced (``previous``) back in (None: one set outside
        Python, as the default), then the wakeup descriptor it found, its pipe closed (the
        order it holds read first)."""
        for signum, handler in previous.items():
            signal.signal(signum, restorable(handler))
        if self._pipe is not None:
            self.signals()  # what came till now: kept, in order
            signal.set_wakeup_fd(self._wakeup)
            for fd in self._pipe:
                os.close(fd)
            self._pipe = None

    def signals(self) -> list[int]:
        """The stop signals so far, in the order they came: as the wakeup pipe has them, then
        any its handler caught that the pipe does not hold (its byte not written yet, or no
        pipe: a caller's handler test); none before a handler ran (:attr:`first_at` is set)."""
        if not self._caught:
            return []
        with self._lock:
            if self._pipe is not None:
                try:
                    while came := os.read(self._pipe[0], _READ):
                        self._order += [s for s in came if s in STOP_SIGNALS]
                except BlockingIOError:
                    pass
            order = list(self._order)
        left = list(self._caught)
        for signum in order:
            if signum in left:
                left.remove(signum)
        return order + left

    def stop_now(self) -> int | None:
        """The stop signal that asked to stop now, without the rest of the grace: a later
        one that is not the first repeated (:func:`launcher.second_signal.stop_now`); None
        where none came."""
        later = stop_now(self._stamped)
        return None if later is None else later.signum

    def repeat_to_say(self) -> int | None:
        """The first stop signal that repeated the first one (the same stop:
        :func:`launcher.second_signal.repeated`), once: None after it was returned, and
        where none came."""
        if self._repeat_said or (again := repeated(self._stamped)) is None:
            return None
        self._repeat_said = True
        return again.signum
