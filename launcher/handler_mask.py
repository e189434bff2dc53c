"""The stop signals held off while the C-level handler of one of them runs.

CPython sets its handlers with an empty ``sa_mask``: while the C-level handler of one signal
runs (it writes the signal's number to the wakeup pipe, :mod:`launcher.arrivals`), another
signal runs its own handler on top of it, which then writes first. That happens before the
first handler's first instruction too: the kernel took a signal for the main thread, another
came while that thread waited for a CPU (a loaded host), and the kernel set the later one's
handler on top of the earlier one's before either ran. So a Ctrl-C and a SIGTERM sent after it
read as SIGTERM, then SIGINT (143, not 130), and two that came together read as the
higher-numbered one first.

:func:`hold_each_other` adds the stop signals to each one's ``sa_mask``, through libc's
``sigaction`` (Python has no call for it): the kernel then keeps a later one pending till the
first one's handler has returned, and the wakeup pipe has them in the order it took them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import platform
import sys
from collections.abc import Sequence

#: CPython sets it on every handler (a sanity check of the layout below)
_SA_ONSTACK = 0x08000000
#: bytes of glibc's and musl's ``sigset_t``: 1024 signals
_SIGSET_BYTES = 128


class _SigAction(ctypes.Structure):
    """``struct sigaction`` of glibc and musl on Linux (all but MIPS, whose flags come first)."""

    _fields_ = [
        ("handler", ctypes.c_void_p),
        ("mask", ctypes.c_ubyte * _SIGSET_BYTES),
        ("flags", ctypes.c_int),
        ("restorer", ctypes.c_void_p),
    ]


def _libc() -> ctypes.CDLL | None:
    """libc, where ``struct sigaction`` is :class:`_SigAction`'s; None elsewhere."""
    if not sys.platform.startswith("linux") or platform.machine().startswith("mips"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


def hold_each_other(signums: Sequence[int]) -> bool:
    """While the handler of any of ``signums`` runs, the kernel holds the others (and a second
    of its own) pending: its ``sigaction``'s ``sa_mask`` holds them all, its handler and flags
    kept. For handlers :func:`signal.signal` has just set; what it sets next replaces this
    (an empty mask again). Returns whether every one was so set: not on a platform whose
    ``struct sigaction`` is not known here (macOS, MIPS), nor where one read back does not
    look as CPython sets it (then it is left as it was)."""
    libc = _libc()
    if libc is None:
        return False
    done = True
    for signum in signums:
        action = _SigAction()
        if libc.sigaction(signum, None, ctypes.byref(action)) != 0:
            done = False
            continue
        if action.handler in (None, 0, 1) or not action.flags & _SA_ONSTACK:  # not CPython's
            done = False
            continue
        for other in signums:
            libc.sigaddset(ctypes.byref(action, _SigAction.mask.offset), other)
        done = libc.sigaction(signum, ctypes.byref(action), None) == 0 and done
    return done
