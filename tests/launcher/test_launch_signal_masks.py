"""The launcher's threads leave the stop signals to its main thread, so that it takes each as it
comes (:mod:`launcher.arrivals`), and its children get them all the same: a child, started
within that block, unblocks them before its program runs. It did so only in the
preexec that asks the kernel for the parent-death signal, which is not made where that cannot be
asked for (not Linux, or a libc that ctypes cannot find): there the children kept the block
through exec, and a stop's SIGTERM stayed pending in them till the grace's SIGKILL."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from launcher import child, process_group
from launcher.child import ChildSpec
from launcher.interrupt import STOP_SIGNALS
from launcher.supervisor import Supervisor
from tests.launcher.real_children import RecordingOutput, wait_until

#: the stop signals as a mask of /proc's ``SigBlk``
STOPS = sum(1 << (signum - 1) for signum in STOP_SIGNALS)


#: the child: its mask as /proc has it, then it waits for the file its argument names (a
#: Python, whose mask is the one it was given: sh unblocks every signal as it starts)
WAITS = """\
import os, sys, time
print(next(line for line in open("/proc/self/status") if line.startswith("SigBlk:")), end="")
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
"""


def _blocked(status: str) -> int:
    """The ``SigBlk`` mask in the text of a ``/proc/.../status``."""
    return next(int(line.split()[1], 16) for line in status.splitlines() if line[:7] == "SigBlk:")


def _no_libc(*_args: object, **_kwargs: object) -> object:
    raise OSError("no libc here")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.timeout(30)
@pytest.mark.parametrize("prctl", [True, False], ids=["death-signal", "none"])
def test_the_threads_block_the_stop_signals_and_the_children_do_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prctl: bool
):
    if not prctl:  # as on macOS, or where ctypes finds no libc: no death signal to ask for
        monkeypatch.setattr(process_group.ctypes, "CDLL", _no_libc)
    go = tmp_path / "go"
    spec = ChildSpec("worker", 0, [sys.executable, "-c", WAITS, str(go)])
    sup = Supervisor(tmp_path / "run", out=RecordingOutput(), err=RecordingOutput())
    masks: dict[str, int] = {}
    failed: list[BaseException] = []  # the looker's own failure: a thread's is lost otherwise
    before = set(threading.enumerate())  # another test's, left in this process: not run()'s

    def look() -> None:  # while run() holds the main thread: its threads' masks, then go
        def started() -> list[threading.Thread]:  # running: one still starting (enumerate
            # lists it) has no native_id yet, its /proc path '.../task/None' then missing
            names = ("pump-worker-0", "wait-worker-0", "terminal")
            threads = set(threading.enumerate()) - before
            return [t for t in threads if t.name in names and t.is_alive()]

        try:
            wait_until(lambda: len(started()) == 4, "the child's threads and two writers")
            for thread in started():
                try:
                    status = Path(f"/proc/self/task/{thread.native_id}/status").read_text()
                except FileNotFoundError:
                    if thread.is_alive():  # alive, and no /proc entry: a failure to report
                        raise
                    continue  # a writer done already (FileNotFoundError at its /proc entry)
                masks[f"{thread.name} {thread.native_id}"] = _blocked(status)
        except BaseException as exc:  # noqa: BLE001 - reported by the test's assertion
            names = sorted(t.name for t in set(threading.enumerate()) - before)
            failed.append(AssertionError(f"{exc!r}; threads started: {names}"))
        finally:
            go.touch()

    looker = threading.Thread(target=look)
    looker.start()
    try:
        assert sup.run(lambda restart: [spec]) == 0
    finally:
        looker.join(10)
    assert not failed, failed
    assert masks and all(mask & STOPS == STOPS for mask in masks.values()), masks
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) & set(STOP_SIGNALS) == set()  # main's
    log = (tmp_path / "run" / "logs" / "worker-0.log").read_text()
    assert _blocked(log) & STOPS == 0, log  # was 0x4003 without the death signal's preexec


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.timeout(30)
def test_a_signal_a_child_takes_before_its_exec_is_not_the_launchers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A Ctrl-C to the launcher's process group reached a child forked but not yet in its own
    session, held there by the launcher's block till its preexec unblocked it: the child, not
    yet its program, took it with the launcher's handler and wrote it to the launcher's wakeup
    pipe, which it shares till exec. The launcher read it as a signal of its own: one Ctrl-C
    read as two, the stop's grace cut ("stop now"), or a SIGTERM that came first read as
    second. Here the child takes a SIGINT so; the launcher then gets one SIGTERM."""

    def ctrl_c_at_the_fork() -> Callable[[], None]:
        preexec = process_group.parent_death_signal()

        def first_a_sigint() -> None:
            os.kill(os.getpid(), signal.SIGINT)  # to the child, pending: it blocks it yet
            preexec()

        return first_a_sigint

    monkeypatch.setattr(child, "parent_death_signal", ctrl_c_at_the_fork)
    spec = ChildSpec("worker", 0, [sys.executable, "-c", WAITS, str(tmp_path / "never")])
    sup = Supervisor(tmp_path / "run", grace=5, out=RecordingOutput(), err=RecordingOutput())

    def stop() -> None:  # once the child runs its program: the launcher's one signal
        log = tmp_path / "run" / "logs" / "worker-0.log"
        try:
            wait_until(lambda: log.exists() and log.read_text(), "the child's program")
        except AssertionError:  # no signal to a process that may not be handling it: the
            (tmp_path / "never").touch()  # child ends, and run() with it
            raise
        os.kill(os.getpid(), signal.SIGTERM)

    stopper = threading.Thread(target=stop)
    stopper.start()
    try:
        status = sup.run(lambda restart: [spec])
    finally:
        stopper.join(10)
    assert (status, sup._signals) == (128 + signal.SIGTERM, [signal.SIGTERM])  # was 130
