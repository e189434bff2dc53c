"""The launcher's first stop signal is the one that came first, though Python ran the handler
of another first.

Where a SIGTERM and then a SIGINT both came before Python could run a handler (its main thread
in a C call, the signals taken by another thread), Python ran them in signal-number order,
SIGINT's first: the launcher recorded SIGINT as the first and exited 130, not 143. Its order
is now the wakeup pipe's (:mod:`launcher.arrivals`), which the C-level handler writes as each
signal comes."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from distconv.restorable import restorable
from launcher.handler_mask import _libc, _SigAction, hold_each_other
from launcher.supervisor import Supervisor
from tests.launcher.real_children import wait_until

STOPS = {signal.SIGINT, signal.SIGTERM}
#: where :func:`hold_each_other` sets the masks
LINUX = sys.platform.startswith("linux")


def _sigterm_then_sigint() -> None:
    """SIGTERM, then SIGINT, to the thread that sends them (delivered before each call
    returns): each C-level handler runs as its signal comes, in the order sent."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)  # the main thread's mask, inherited
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)


@pytest.mark.timeout(30)
def test_a_sigterm_then_a_sigint_both_come_before_a_handler_runs_first_sigterm(tmp_path: Path):
    sup = Supervisor(tmp_path)
    previous = sup._arrivals.catch()  # the handlers and wakeup pipe run() sets
    try:
        # the main thread takes neither signal, and waits in a C call (the join's lock) while
        # both come: Python runs their handlers only once it is back, both pending by then
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
        try:
            sender = threading.Thread(target=_sigterm_then_sigint)
            sender.start()
            sender.join()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        wait_until(lambda: len(sup._arrivals._caught) == 2, "both handlers run")
        # the case itself: Python ran SIGINT's handler first, though SIGTERM came first
        assert sup._arrivals._caught == [signal.SIGINT, signal.SIGTERM]
        assert sup._signals == [signal.SIGTERM, signal.SIGINT]  # was [SIGINT, SIGTERM]: 130
    finally:
        sup._arrivals.give_back(previous)
    assert signal.set_wakeup_fd(-1) == -1  # the wakeup descriptor given back (none before)


@pytest.mark.timeout(30)
def test_the_wakeup_pipe_is_made_where_there_is_no_pipe2(tmp_path: Path, monkeypatch):
    """The wakeup pipe was made with :func:`os.pipe2`, which macOS lacks: every launch there
    failed with an AttributeError as its job began. A pipe of :func:`os.pipe` is
    close-on-exec already, made non-blocking as set_wakeup_fd requires."""
    monkeypatch.delattr(os, "pipe2")
    sup = Supervisor(tmp_path)
    previous = sup._arrivals.catch()
    try:
        pipe = sup._arrivals._pipe
        assert pipe is not None
        assert not any(os.get_blocking(fd) or os.get_inheritable(fd) for fd in pipe)
        signal.raise_signal(signal.SIGTERM)  # its handler records it, through the pipe too
        assert sup._signals == [signal.SIGTERM]
    finally:
        sup._arrivals.give_back(previous)
    assert signal.set_wakeup_fd(-1) == -1


@pytest.mark.timeout(30)
def test_a_signal_handed_over_before_its_handler_ran_is_read_before_the_next(tmp_path: Path):
    """The kernel hands a signal to the main thread before its C-level handler runs, and one
    that came meanwhile (the thread waiting for a CPU on a loaded host) ran its handler on top
    of the first's: a Ctrl-C, then a SIGTERM sent once the Ctrl-C was taken, read SIGTERM
    first, and the launcher exited 143, not 130. Here both wait, blocked, and are handed over
    together as the mask lifts: SIGINT first (the lower number), whose handler now holds
    SIGTERM off till it has written (it was read [SIGTERM, SIGINT])."""
    sup = Supervisor(tmp_path)
    previous = sup._arrivals.catch()
    try:
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
        try:  # to this thread: pending here, no other thread takes them
            signal.pthread_kill(threading.get_ident(), signal.SIGTERM)
            signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        wait_until(lambda: len(sup._arrivals._caught) == 2, "both handlers run")
        assert sup._signals == [signal.SIGINT, signal.SIGTERM]
    finally:
        sup._arrivals.give_back(previous)


def _mask(signum: int) -> set[int]:
    """The signals in ``signum``'s ``sa_mask``, as libc's ``sigaction`` reads it back."""
    action, libc = _SigAction(), _libc()
    assert libc is not None and libc.sigaction(signum, None, ctypes.byref(action)) == 0
    bits = int.from_bytes(bytes(action.mask)[:8], sys.byteorder)  # signals 1 to 64
    return {number for number in range(1, 65) if bits >> (number - 1) & 1}


def test_a_handler_not_set_by_python_keeps_its_mask():
    """Only a handler as CPython sets it is given the mask (its layout read right): a default
    one is left as it was, and said so; one of Python's is set, each holding the other off,
    till ``signal.signal`` sets it again (an empty mask). The masks are read back: a return
    value alone passed where the default one was given the mask all the same."""
    pair = (signal.SIGUSR1, signal.SIGUSR2)
    previous = {signum: signal.signal(signum, signal.SIG_DFL) for signum in pair}
    try:
        assert hold_each_other(pair) is False
        if LINUX:
            assert _mask(signal.SIGUSR1) == _mask(signal.SIGUSR2) == set()
        for signum in pair:
            signal.signal(signum, lambda *_: None)
        assert hold_each_other(pair) is LINUX
        if LINUX:
            assert _mask(signal.SIGUSR1) == _mask(signal.SIGUSR2) == set(pair)
            signal.signal(signal.SIGUSR1, lambda *_: None)
            assert _mask(signal.SIGUSR1) == set()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, restorable(handler))
