"""Where the launcher gives up on a child's pipe that a process outside its group holds, the
child's pipe and log are closed once that process lets go and the pump ends: nothing closed
them, left to the files' finalizers, so they stayed open as long as the Child was referenced,
two descriptors a held attempt, which ``--max-restarts`` adds up (here several attempts, their
children kept; their logs looked for in ``/proc/self/fd``, this process's own)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import launcher.child
from launcher.child import Child, ChildSpec
from tests.launcher.real_children import run_to_exit, stray_for_a_while

#: a stray leaves the group holding the pipe for a while; the child prints and dies
CHILD = stray_for_a_while(0.4, b"fatal: boom\n")


def _open_under(folder: Path) -> list[str]:
    """The files under ``folder`` that this process has open (``/proc/self/fd``): this test's
    alone, whatever other tests' pumps in this process close meanwhile."""
    named = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            named.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # closed meanwhile (listdir's own, another thread's)
            pass
    return [name for name in named if name.startswith(f"{folder.resolve()}{os.sep}")]


def _held_attempt(tmp_path, attempt: int) -> Child:
    """One attempt whose pipe a stray holds: finished (given up on), then its pump ended."""
    spec = ChildSpec("worker", 0, [sys.executable, "-c", CHILD])
    child = run_to_exit(tmp_path, spec, f"w{attempt}.log")
    assert child.output_held is not None  # the stray held the pipe: given up on
    child._pump.join(10)  # the stray lets go: the pump reads the end
    assert not child._pump.is_alive()
    return child


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="no /proc")
@pytest.mark.timeout(60)
def test_a_held_attempts_pipe_and_log_are_closed_once_its_pump_ends(tmp_path, monkeypatch):
    monkeypatch.setattr(launcher.child, "OUTPUT_DRAIN_SECONDS", 0.05)  # the product's 5 s
    children = [_held_attempt(tmp_path, attempt) for attempt in range(3)]
    assert _open_under(tmp_path) == []  # was each attempt's log
    assert all(child.proc.stdout.closed and child.log.closed for child in children)
    assert all(child.log_path.read_bytes() == b"fatal: boom\n" for child in children)
