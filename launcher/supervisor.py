"""Run a gang of child processes as one job: prefixed output, gang kill, restarts, signals.

The rules (issue 11, "Gang semantics"):

- Every child runs in its own session, hence its own process group, and is always stopped by
  signalling the whole group, so nothing it started outlives the job.
- A child that fails (non-zero exit or a signal) ends the attempt: every other child gets
  SIGTERM, then SIGKILL after ``grace`` seconds. The job is started again, up to
  ``max_restarts`` times; then the launcher exits non-zero with a report naming the first
  failing role and rank, its exit code or signal and the tail of its log, on stderr and as JSON
  in ``<run_dir>/failure.json``.
- The attempt succeeds when every worker has exited 0; servers still running then are stopped.
- SIGTERM, SIGINT or SIGHUP to the launcher is passed to every child as SIGTERM (distconv
  checkpoints on it), then SIGKILL after ``grace``; the launcher exits 128 + the signal (143,
  130 or 129). On Linux each child also asks the kernel for SIGTERM when the launcher dies
  (``PR_SET_PDEATHSIG``), so even a SIGKILLed launcher takes its children with it.
- The failure reported is the one that happened first: each child's exit time is taken by a
  thread waiting on it, so two children failing within one poll are told apart.
- Each line of output is written whole, behind its child's prefix, under one lock; the
  child's own log in ``<run_dir>/logs/`` gets the same lines without the prefix.
"""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import BinaryIO

TAIL_LINES = 20
#: signals that stop the job: each becomes SIGTERM to every child, then 128 + it as our status
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


def _parent_death_signal() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking the kernel to SIGTERM the child when its parent dies (Linux).

    Everything is looked up here, in the parent: between fork and exec the child only calls
    the prepared function (the launcher has threads, so the child may not take their locks).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM.value, 0, 0, 0)
        if os.getppid() != parent:  # the launcher died before the prctl took hold
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


@dataclass(frozen=True)
class ChildSpec:
    """One process of the job.

    Attributes:
        role: ``"worker"``, ``"server"`` or another word (``"mpiexec"``) for the prefix.
        rank: its rank among its role.
        argv: the command.
        env: its whole environment.
        prefix: put before each of its output lines; None means ``"[role rank] "``.
    """

    role: str
    rank: int
    argv: Sequence[str]
    env: dict[str, str] = field(repr=False, default_factory=dict)
    prefix: str | None = None

    @property
    def name(self) -> str:
        """``worker-1``: names its log file and the failure report."""
        return f"{self.role}-{self.rank}"

    @property
    def line_prefix(self) -> bytes:
        prefix = f"[{self.role} {self.rank}] " if self.prefix is None else self.prefix
        return prefix.encode()


@dataclass(frozen=True)
class Failure:
    """The first child that failed in an attempt."""

    role: str
    rank: int
    exit_code: int | None
    signal: str | None
    log: str
    tail: list[str]
    restart: int

    @property
    def status(self) -> int:
        """The launcher's exit status for this failure: the child's code, or 128 + signal."""
        if self.exit_code is not None:
            return self.exit_code if 0 < self.exit_code < 256 else 1
        return 128 + signal.Signals[self.signal].value if self.signal else 1

    def describe(self) -> str:
        how = f"exit code {self.exit_code}" if self.signal is None else f"signal {self.signal}"
        return f"{self.role} {self.rank} failed with {how}"


class _Child:
    """A running child: its process, its log, and the thread copying its output."""

    def __init__(self, spec: ChildSpec, log_path: Path, out: BinaryIO, lock: threading.Lock):
        self.spec = spec
        #: monotonic time the process exited, set by the waiter thread (None while it runs)
        self.exited_at: float | None = None
        self.log_path = log_path
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.proc = subprocess.Popen(
            list(spec.argv),
            env=spec.env or None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: we signal the group, not the pid
            preexec_fn=_parent_death_signal(),
        )
        self.log = open(log_path, "ab")  # closed by finish()
        self.returncode: int | None = None
        self._pump = threading.Thread(
            target=self._copy, args=(out, lock), name=f"pump-{spec.name}", daemon=True
        )
        self._pump.start()
        self._waiter = threading.Thread(target=self._wait, name=f"wait-{spec.name}", daemon=True)
        self._waiter.start()

    def _wait(self) -> None:
        self.proc.wait()
        self.exited_at = time.monotonic()

    def _copy(self, out: BinaryIO, lock: threading.Lock) -> None:
        prefix = self.spec.line_prefix
        echo = True
        for line in iter(self.proc.stdout.readline, b""):
            if not line.endswith(b"\n"):
                line += b"\n"
            self.log.write(line)
            self.tail.append(line.decode(errors="replace").rstrip("\n"))
            if not echo:
                continue
            with lock:  # one write per whole line: prefixes never split a line
                try:
                    out.write(prefix + line)
                    out.flush()
                except OSError:  # our stdout is gone (`| head`): keep draining into the log
                    echo = False
        self.log.flush()

    def poll(self) -> int | None:
        """The exit status once the waiter has recorded the exit time, else None."""
        if self.returncode is None and self.exited_at is not None:
            self.returncode = self.proc.returncode
        return self.returncode

    def signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass  # the whole group is gone already

    def finish(self) -> None:
        """Kill whatever is left of the group, reap, drain the output, close the log."""
        self.signal_group(signal.SIGKILL)
        self.proc.wait()
        self._waiter.join()
        self.poll()
        self._pump.join(timeout=10)
        self.proc.stdout.close()
        self.log.close()

    def failure(self, restart: int) -> Failure:
        """What went wrong, for the report; call after :meth:`finish` so the tail is whole."""
        code = self.returncode
        sig = signal.Signals(-code).name if code is not None and code < 0 else None
        return Failure(
            role=self.spec.role,
            rank=self.spec.rank,
            exit_code=None if sig else code,
            signal=sig,
            log=str(self.log_path),
            tail=list(self.tail),
            restart=restart,
        )


class Supervisor:
    """Runs a job's children as a gang, with restarts and a failure report.

    Args:
        run_dir: where ``logs/<role>-<rank>.log`` and ``failure.json`` go.
        grace: seconds between SIGTERM and SIGKILL when stopping children.
        out: where prefixed child lines go (default: the launcher's stdout).
        err: where the launcher's own messages and the failure report go (default stderr).
        poll: seconds between looks at the children.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike,
        grace: float = 30.0,
        out: BinaryIO | None = None,
        err: BinaryIO | None = None,
        poll: float = 0.05,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.grace = grace
        self.out = out if out is not None else sys.stdout.buffer
        self.err = err if err is not None else sys.stderr.buffer
        self.poll_interval = poll
        self._lock = threading.Lock()
        self._signals: list[int] = []

    def say(self, message: str) -> None:
        """One launcher message on ``err``, never inside a child's line."""
        with self._lock:
            self.err.write(f"distconv-launch: {message}\n".encode())
            self.err.flush()

    def run(self, build: Callable[[int], list[ChildSpec]], max_restarts: int = 0) -> int:
        """Run the job until it succeeds, runs out of restarts, or the launcher is signalled.

        Args:
            build: the children of attempt ``restart`` (0 first), called once per attempt so
                each attempt can have fresh ports and ``--resume auto``.
            max_restarts: how many times a failed job is started again.

        Returns:
            The launcher's exit status: 0, the failing child's status, or 128 + signal.
        """
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        previous = self._install_handlers()
        try:
            for restart in range(max_restarts + 1):
                failure = self._attempt(build(restart), restart)
                if self._signals:  # also when it came while a failed attempt was stopping
                    self.say(f"stopped by {signal.Signals(self._signals[0]).name}")
                    return 128 + self._signals[0]
                if failure is None:
                    return 0
                if restart < max_restarts:
                    attempt = f"{restart + 1} of {max_restarts}"
                    self.say(f"{failure.describe()}; restarting the job ({attempt})")
            self._report(failure, max_restarts)
            return failure.status
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _install_handlers(self) -> dict[int, object]:
        if threading.current_thread() is not threading.main_thread():
            return {}  # signal handlers can only be set there; the caller forwards signals
        previous = {}
        for signum in STOP_SIGNALS:
            previous[signum] = signal.signal(signum, lambda s, _f: self._signals.append(s))
        return previous

    def _attempt(self, specs: list[ChildSpec], restart: int) -> Failure | None:
        """Start the children, watch them until the attempt ends, stop what is left."""
        children: list[_Child] = []
        try:
            for spec in specs:
                log_path = self.run_dir / "logs" / f"{spec.name}.log"
                children.append(_Child(spec, log_path, self.out, self._lock))
            failed = self._watch(children)
            self._stop(children)
        finally:
            for child in children:
                child.finish()
        return failed.failure(restart) if failed is not None else None

    def _watch(self, children: list[_Child]) -> _Child | None:
        """The first child to fail; None when every worker succeeded or a signal came."""
        workers = [c for c in children if c.spec.role != "server"]
        while True:
            if self._signals:
                self.say(f"got {signal.Signals(self._signals[0]).name}; stopping every child")
                return None
            failed = [c for c in children if c.poll() not in (None, 0)]
            if failed:  # several within one poll: the one that exited first
                return min(failed, key=lambda c: c.exited_at)
            if all(c.poll() == 0 for c in workers):
                return None
            time.sleep(self.poll_interval)

    def _stop(self, children: list[_Child]) -> None:
        """SIGTERM to every group, SIGKILL after the grace period (or at a second signal).

        Groups whose leader has exited are signalled too: what the leader left behind gets
        the same chance to clean up.
        """
        for child in children:
            child.signal_group(signal.SIGTERM)
        signals_seen = len(self._signals)
        deadline = time.monotonic() + self.grace
        while any(c.poll() is None for c in children):
            if time.monotonic() > deadline or len(self._signals) > signals_seen:
                break  # out of patience, or the user signalled again: kill now
            time.sleep(self.poll_interval)
        for child in children:
            child.signal_group(signal.SIGKILL)

    def _report(self, failure: Failure, max_restarts: int) -> None:
        path = self.run_dir / "failure.json"
        entry = {**asdict(failure), "max_restarts": max_restarts, "time": time.time()}
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(entry, indent=2) + "\n")
        os.replace(tmp, path)
        tail = "\n".join(f"    {line}" for line in failure.tail) or "    (no output)"
        self.say(
            f"{failure.describe()} (after {failure.restart} restart(s)); "
            f"last lines of {failure.log}:\n{tail}\nreport: {path}"
        )
