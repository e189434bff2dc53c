"""The launcher's stop signals before its supervisor takes them over.

From its first line to the supervisor's own handlers (:mod:`launcher.supervisor`) the launcher
imports numpy and distconv, makes the job's CURVE keys and asks ``mpiexec -V`` its flavor:
about half a second. Without a handler of its own, a Ctrl-C there printed a traceback, and a
SIGTERM or SIGHUP ended it silently, leaving a ``distconv keys`` it had started. :func:`defer`
(the program's first step: the stdlib and :mod:`distconv.restorable` only, which imports no
numpy) keeps a signal that comes while the modules import; :func:`arm` then raises it, and
every later one, as :class:`Interrupted`, which ``distconv-launch`` turns into one line and
``128 + signal``.

An armed signal that lands inside an import (numpy's, lazily imported for a train job's flags)
is not raised there: a half-imported numpy cannot be imported again, so the one line's own
imports failed with a traceback, and one in importlib's own callbacks was dropped ("Exception
ignored"). It is sent again a moment later, until it finds the import done.

A signal the launcher was started ignoring stays ignored, as the supervisor keeps it (``nohup``'s
SIGHUP, a shell's background job's SIGINT), but for SIGTERM, which always stops a job.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import TYPE_CHECKING

from distconv.restorable import restorable

if TYPE_CHECKING:  # the first import of the launcher: only what defer() needs, at once
    import subprocess
    from collections.abc import Callable, Mapping, Sequence

#: signals that stop the job: each becomes SIGTERM to every child, then 128 + it as our status
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_pending: list[int] = []  # the signals that came while deferred
_armed = False
_taken = False  # the supervisor's handlers took over (taken_over): what is kept is no stop now
_previous: dict[int, object] = {}  # the handlers defer() replaced, for release()
#: seconds before a signal that came inside an import is sent again
RETRY_SECONDS = 0.05
_released = 0  # release()s so far: a retry set before one is not sent
_retrying = threading.Lock()  # a retry's check and send, apart from release()
#: arm() or release() ran outside the main thread, where handlers cannot be set: each signal
#: that comes next (its handler runs in the main thread) gives its own back, then goes to it
_elsewhere = False
#: kills the process group of the ``kill_group`` child that :func:`run_captured` waits for
#: (None where it waits for none, or once it killed it), as a stop kept for :func:`arm` or
#: :func:`kept` comes; one child, the main thread's (run_captured's kill_group is for it)
_captured: Callable[[], None] | None = None


class Interrupted(KeyboardInterrupt):
    """A stop signal before the job started (a :class:`KeyboardInterrupt`, so that
    ``subprocess.run`` kills the child it waits for, as on Ctrl-C)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def stop_signals_to_catch() -> list[int]:
    """The :data:`STOP_SIGNALS` the launcher handles: all but one it was started ignoring
    (SIGTERM is handled even so)."""
    return [
        signum
        for signum in STOP_SIGNALS
        if signum == signal.SIGTERM or signal.getsignal(signum) is not signal.SIG_IGN
    ]


def _on_signal(signum: int, _frame: object) -> None:
    if _elsewhere:  # a launch in another thread holds no signals: the caller forwards them
        # its own alone: another one already come, its handler not run yet, still finds this
        # one (given back as SIG_DFL or SIG_IGN before it ran, CPython dropped it unsaid)
        _give_back(signum)
        if signal.getsignal(signum) is not _on_signal:
            os.kill(os.getpid(), signum)  # to the handler given back
        return  # else one inside its own give-back, which sends it on: never raised here
    if not _armed:
        _pending.append(signum)  # raised by arm(): an import is no place for an exception
        if _captured is not None and not _taken:  # the launch ends on it, before it armed:
            _kill_captured()  # pyenv's answer is no use, and in a session of its own a
        return  # terminal's Ctrl-C no longer reached it (the launch waited out its bound)
    if _importing(_frame):
        again = threading.Timer(RETRY_SECONDS, _send_again, (signum, _released))
        again.daemon = True
        again.start()
        return
    raise Interrupted(signum)


def _send_again(signum: int, released: int) -> None:
    """The retry of a signal that came inside an import, unless :func:`release` came since:
    it dropped what the launcher kept, and the handlers are the caller's again (SIGTERM's
    default killed the process that had called the launcher as a function)."""
    with _retrying:
        if released == _released:
            os.kill(os.getpid(), signum)


def _importing(frame: object) -> bool:
    """Whether ``frame`` or a caller of it runs an import (importlib's own frames)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def defer() -> None:
    """Keep the stop signals that come from now on until :func:`arm` (main thread only)."""
    global _elsewhere
    if threading.current_thread() is threading.main_thread():
        _elsewhere = False  # taken again here, for a launch in this thread
        for signum in stop_signals_to_catch():
            handler = signal.signal(signum, _on_signal)
            if handler is not _on_signal:  # the caller's, set since the import's defer too
                _previous[signum] = handler


def arm() -> None:
    """From now on a stop signal raises :class:`Interrupted`; one kept by :func:`defer` is
    raised at once. Outside the main thread, where the launch sets no handlers (the caller
    forwards the signals), each that comes gives back its handler the import's defer() took.

    Raises:
        Interrupted: a stop signal came while deferred.
    """
    global _armed, _elsewhere
    defer()  # where the program's first step did not (the launcher called as a function)
    if threading.current_thread() is not threading.main_thread():  # what the import's
        _elsewhere = True  # defer() took: the caller's again, as a launch there sets none
    _armed = True
    if _pending:
        raise Interrupted(_pending[0])


def kept() -> int | None:
    """The first stop signal kept since :func:`defer`, the launcher not armed yet (argparse's
    usage error, its help), else None (once armed, :func:`arm` has raised it; once the job
    ran, :func:`taken_over`, it is one to drop: a write it cut was the job's error line)."""
    return _pending[0] if _pending and not _armed and not _taken else None


def taken_over() -> None:
    """The supervisor's own handlers are in (:mod:`launcher.supervisor`): a stop signal that
    comes here again, once it gives the signals back at the job's end, is kept (and dropped by
    :func:`release`), not raised: it would have said "before the job started" with 128 + it for
    a job that had run, and cut the supervisor's own clean-up short."""
    global _armed, _taken
    _armed, _taken = False, True


def release() -> None:
    """Give the stop signals back to the handlers :func:`defer` found, the last it replaced
    (a caller's set after the import's), where the launcher's is still in (not where the
    caller set its own since: the launcher called as a function, in a process that goes on),
    in the main thread (elsewhere signal.signal() raises: there each signal that comes gives
    its own back, in the main thread, and goes on to the handler given back); a signal kept,
    or waiting to be sent again, is dropped."""
    global _armed, _elsewhere, _released, _taken
    _armed = False  # first, before any call: a signal from here is kept, and dropped below
    _taken = False
    with _retrying:
        _released += 1
    if threading.current_thread() is threading.main_thread():
        _give_back()
    else:  # signal.signal() raises ValueError there: each signal gives its own back
        _elsewhere = True
    _pending.clear()  # last: one kept till the handlers are given back is not left for arm()


def _give_back(*signums: int) -> None:
    """The handlers :func:`defer` replaced back in, of ``signums`` (all where none), where
    the launcher's is still in (not where the caller set its own since); main thread only.
    Safe from a handler that a signal runs inside it (each is taken out before it is set)."""
    global _elsewhere
    for signum in signums or list(_previous):
        handler = _previous.pop(signum, _previous)
        if handler is not _previous and signal.getsignal(signum) is _on_signal:  # else kept
            signal.signal(signum, restorable(handler))
    if not _previous:  # last: a signal before it still finds its own to give back
        _elsewhere = False


def run_captured(
    argv: Sequence[str],
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
    kill_group: bool = False,
    kept_stops: bool = False,
) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, capture_output=True, text=True, env=env)``, whose child a stop signal
    never leaves running: a signal that comes while ``Popen`` starts it is kept, and raised once
    the object that can kill it exists (raised inside ``Popen()`` it left the child with nothing
    holding its pid: a ``mpiexec --version`` alive after the launcher).

    With ``kill_group`` the child starts in a session (and process group) of its own, and a
    timeout or a stop kills that whole group: the processes it started too, which outlived it
    otherwise (a hung ``pyenv which``'s own children, holding its output pipe); so does its
    end, and the launcher's death however it dies, which a kill of the launcher's own group
    no longer reached (:func:`launcher.process_group.watched`: its stdin is /dev/null, and a
    program that cannot be started its shell's status 127). Without it (the default) the
    child stays in the launcher's group and only it is killed. A stop kept before the
    launcher armed kills that group too, as a terminal's Ctrl-C to the launcher's no longer
    does: the launch ends on it; so does one kept before the call (the imports', one
    :func:`arm` raised), at once. With ``kept_stops`` too, such a kill raises that stop (as
    :class:`Interrupted`) instead of returning the query's death as its answer (``unknown
    MPI: `mpiexec --version` says ''``): a launch that reads the answer then ends as a stop
    (a caller's that called :func:`defer` itself and has not armed: the launcher's own
    queries run armed; a ``pyenv which`` asked while the launcher parses its words takes
    the answer as none, and :func:`arm` raises the stop). The stops so raised are no longer
    kept (nor :func:`kept`, nor raised by :func:`arm`): the caller's next query runs, and
    its next stop is kept and raised in turn.

    All this is the main thread's, one call at a time, as the launch makes it (the group to
    kill is one module global, :data:`_captured`). In another thread (a launch a library
    caller runs there) the stop signals are the caller's, whose handlers run in the main
    thread: the call leaves their state alone (it disarmed the main thread's launch while it
    started the child, or killed it, and a stop kept then killed this thread's query, then
    raised here), and only a timeout (or an exception raised in this thread) kills the child,
    its group too.

    It is kept by the handler, not by a signal mask: a mask holds the signal off one thread
    only, and the kernel hands a signal sent to the process to any thread that does not block
    it (numpy's BLAS threads, a retry timer), whose Python handler then ran in the main thread
    inside ``Popen`` all the same. A second signal while it kills the child is kept too, till
    the child is dead: raised first, it left the child running and Popen's exit waiting for it.

    Raises:
        OSError: no child could be made (no file descriptor for its pipes, ``fork``'s
            EAGAIN); without ``kill_group`` also a program that cannot be started. With it
            (every launcher caller) the watchdog's shell starts the program, and one it
            cannot start is that shell's status, 126 or 127, returned: a caller says why
            itself (:func:`launcher.startable.exec_failure`, as :mod:`launcher.mpi` does).
        subprocess.TimeoutExpired: it ran past ``timeout`` (it is killed first).
        Interrupted: a stop signal came once the launcher was armed (the child is killed),
            or, with ``kept_stops``, a stop kept before it armed killed the child's group
            (raised once: dropped from what is kept).
    """
    import subprocess

    global _armed, _captured
    command, watchdog, group_end = list(argv), None, None
    if kill_group:  # here, not on the way out: it imports ctypes (process_group imports us)
        from functools import partial

        from .process_group import signal_group, watched

        command, watchdog, group_end = watched(argv)  # its group killed at our death too
    if threading.current_thread() is not threading.main_thread():  # the stops are not ours
        try:
            return _run_elsewhere(argv, command, watchdog, timeout, env, kill_group)
        finally:  # the watchdog's end of file: what the child left running in its group dies
            if group_end is not None:
                os.close(group_end)
    armed, kept = _armed, len(_pending)
    _armed = False  # _on_signal keeps what comes now in _pending
    try:
        try:
            child = _start(command, watchdog, env, kill_group)
        except BaseException:
            _rearm(armed, kept)
            raise
        if kill_group:  # its group ours till group_end closes (the watchdog in it)
            _captured = partial(_kill_unreaped, child, signal_group)
            if _pending and not _taken:  # a stop kept already (the imports', one come as Popen
                _kill_captured()  # started it, one arm() raised): the launch ends on it
        with child:
            try:
                _rearm(armed, kept)  # from here a signal raises in this try: the child killed
                stdout, stderr = child.communicate(timeout=timeout)
            except BaseException as stop:  # a timeout or a stop signal: not left running
                # kept till it is dead: a second signal raised before the kill left it
                # running, and Popen's exit then waited for it. First, before any call, where
                # CPython runs a pending handler; _rearm left _armed and _pending as they were
                _armed = False
                _captured = None  # before the wait, which frees the group's id: no stop kills it
                try:
                    _kill(child, kill_group)
                finally:  # a stop already on its way is the one raised, as the supervisor's
                    _rearm(armed, kept, raising=not isinstance(stop, Interrupted))
                raise
        stopped = kill_group and _captured is None  # a kept stop killed its group
    finally:  # the watchdog's end of file: what the child left running in its group dies
        _captured = None  # first: the group's id is free once the watchdog killed it
        if group_end is not None:
            os.close(group_end)
    if stopped and kept_stops:
        # raised once: what was kept till now goes with it, or it stayed pending, killed every
        # later query at once and raised it again, and swallowed the caller's next Ctrl-C
        # too. One that comes from here is kept, for the next query (or arm()) to raise
        came = len(_pending)  # before the read: one kept between the two is not dropped
        signum = _pending[0]
        del _pending[:came]
        raise Interrupted(signum)
    return subprocess.CompletedProcess(list(argv), child.returncode, stdout, stderr)


def _start(
    command: Sequence[str], watchdog: int | None, env: Mapping[str, str] | None, kill_group: bool
) -> subprocess.Popen:
    """:func:`run_captured`'s child started (in a session of its own with ``kill_group``, its
    stdin the ``watchdog`` pipe's read end, closed here once it is the child's alone)."""
    import subprocess

    try:
        return subprocess.Popen(
            command,
            stdin=watchdog,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=kill_group,
        )
    finally:
        if watchdog is not None:  # the child's alone: the launcher holds the write end
            os.close(watchdog)


def _kill(child: subprocess.Popen, kill_group: bool) -> None:
    """SIGKILL to ``child`` (to its process group first with ``kill_group``: before the wait,
    as the unreaped leader keeps its group's id ours), then its wait."""
    if kill_group:
        from .process_group import signal_group

        signal_group(child.pid, signal.SIGKILL)
    child.kill()
    child.wait()


def _run_elsewhere(
    argv: Sequence[str],
    command: Sequence[str],
    watchdog: int | None,
    timeout: float | None,
    env: Mapping[str, str] | None,
    kill_group: bool,
) -> subprocess.CompletedProcess:
    """:func:`run_captured` outside the main thread: no stop signal's state is touched (they
    are the main thread's, and the caller's there); a timeout, or anything raised in this
    thread, kills the child (its group with ``kill_group``) before it is raised."""
    import subprocess

    with _start(command, watchdog, env, kill_group) as child:
        try:
            stdout, stderr = child.communicate(timeout=timeout)
        except BaseException:
            _kill(child, kill_group)
            raise
    return subprocess.CompletedProcess(list(argv), child.returncode, stdout, stderr)


def _kill_captured() -> None:
    """Kill the group :data:`_captured` names, once: it is forgotten first, as its leader may
    be reaped from here, its id then free (another's, once reused)."""
    global _captured
    kill, _captured = _captured, None
    if kill is not None:
        kill()


def _kill_unreaped(child: subprocess.Popen, signal_group: Callable[[int, int], None]) -> None:
    """SIGKILL to the process group of ``child``, a group's leader, while it is not reaped (a
    kill from elsewhere, ``kill 0`` in pyenv, ended it; ``communicate`` reaps it): only then
    does the group's id stay its own."""
    if child.returncode is None:
        signal_group(child.pid, signal.SIGKILL)


def _rearm(armed: bool, kept: int, raising: bool = True) -> None:
    """Arm again if :func:`run_captured` found the launcher armed, and raise the first stop
    signal kept since (``_pending`` past ``kept``), or drop it where not ``raising``; one kept
    before arming stays for :func:`arm`.

    Raises:
        Interrupted: a stop signal came while the child started (or was killed).
    """
    global _armed
    _armed = armed
    if armed and len(_pending) > kept:
        signum = _pending[kept]
        del _pending[kept:]
        if raising:
            raise Interrupted(signum)
