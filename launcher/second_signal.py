"""Whether a stop signal after the launcher's first one means "stop now", or is that one again.

A second stop signal kills what is left of the job without the rest of its grace: a person
asks for that with a second Ctrl-C, or by signalling again once the stop seems to hang. But a
program may deliver one stop twice: GNU ``timeout`` signals its child, then its whole process
group (``kill(0, sig)``), microseconds apart, and so does a script that signals a pid and its
group. The kernel merges a signal still pending with the same one again, so the launcher saw
one signal or two by the moment, and where two it SIGKILLed every worker in its checkpoint.
(``distconv train`` takes a repeated SIGTERM as one stop too: :mod:`distconv.stop_request`.)

So a later stop signal means "stop now" (:func:`stop_now`) where it comes more than
:data:`REPEAT_SECONDS` after the first, or where it is a person's second Ctrl-C: a SIGINT that
came while the launcher's process group was its terminal's foreground group (where the
terminal sends it), at least :data:`KEYSTROKE_SECONDS` after the first. Any other is the first
stop repeated (:func:`repeated`), said once, and the children keep their grace.

A terminal's Ctrl-C goes to its whole foreground process group at once: the launcher and any
wrapper it runs under there (``timeout --foreground``, a shell script), which may forward it
to the launcher again; the launcher's children each run in a session of their own and get
the launcher's SIGTERM instead. The forwarded copy comes within milliseconds, sooner than a
person presses Ctrl-C again: the same stop.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass

#: seconds after the first stop signal within which another, not a person's Ctrl-C, is the
#: same stop: a program that delivers one stop twice (``timeout``, a pid and its group) does it
#: within microseconds, tens of milliseconds on a loaded host; a person's second ``kill``, typed
#: once the stop seems slow, comes seconds later, and still kills what is left
REPEAT_SECONDS = 1.0
#: seconds a person's second Ctrl-C takes at least: a SIGINT sooner is the same keystroke, sent
#: again by a wrapper in the terminal's foreground group that got it too
KEYSTROKE_SECONDS = 0.1


@dataclass(frozen=True)
class Caught:
    """A stop signal as the launcher's handler took it."""

    signum: int
    #: ``time.monotonic()`` as its handler ran
    at: float
    #: a SIGINT while the launcher was in its terminal's foreground group: a Ctrl-C, most likely
    keyed: bool


def caught(signum: int, at: float) -> Caught:
    """``signum`` taken by a handler at ``at`` (``time.monotonic()``), with whether it is a
    Ctrl-C (:func:`in_terminal_foreground`, looked at now)."""
    return Caught(signum, at, signum == signal.SIGINT and in_terminal_foreground())


def in_terminal_foreground() -> bool:
    """Whether this process's group is the foreground group of its controlling terminal, the
    group a terminal's Ctrl-C goes to (False without a terminal: a service, a container, a
    session of its own, a job a shell put in the background)."""
    try:  # non-blocking: a serial line's open waits for its carrier, here in a signal handler
        tty = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(tty) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(tty)


def stop_now(signals: Sequence[Caught]) -> Caught | None:
    """The first of ``signals`` after the first one that asks to stop now: one more than
    :data:`REPEAT_SECONDS` after the first, or a person's Ctrl-C at least
    :data:`KEYSTROKE_SECONDS` after it; None where none does."""
    return next((again for again, asks in _after_the_first(signals) if asks), None)


def repeated(signals: Sequence[Caught]) -> Caught | None:
    """The first of ``signals`` after the first one that is that stop again, before any that
    asks to stop now (:func:`stop_now`); None where none is."""
    for again, asks in _after_the_first(signals):
        return None if asks else again
    return None


def _after_the_first(signals: Sequence[Caught]) -> list[tuple[Caught, bool]]:
    """Each of ``signals`` after the first one (by :attr:`Caught.at`: a handler can run inside
    another's, and be listed first), in order, with whether it asks to stop now."""
    if not signals:
        return []
    first, *later = sorted(signals, key=lambda c: c.at)
    return [(again, _asks_to_stop_now(again.at - first.at, again.keyed)) for again in later]


def _asks_to_stop_now(since: float, keyed: bool) -> bool:
    """Whether a stop signal ``since`` seconds after the first (``keyed``: a Ctrl-C) asks to
    stop now, rather than repeat the first."""
    return since > REPEAT_SECONDS or (keyed and since >= KEYSTROKE_SECONDS)


def same_stop(signal_name: str) -> str:
    """What the launcher says of a stop signal, ``signal_name`` (``SIGTERM``), taken as the
    first one again, and how to ask to stop now instead: a person who signalled twice to kill
    what is left learns why nothing was killed, and what does kill it."""
    return (
        f"got {signal_name} again within {REPEAT_SECONDS:g} s of the first: the same stop, "
        "so the children keep their grace; to kill them now, signal again more than "
        f"{REPEAT_SECONDS:g} s after the first"
    )
