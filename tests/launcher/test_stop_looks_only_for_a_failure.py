"""The launcher's stop reads ``/proc`` for stopped processes (:class:`~launcher.stopped_processes.
StopFindings`) only where a failure is to be reported: a job's success stops its shards, still
running, and read the stat of every process on the host (about 18 us each: some 40 ms on a node
of 2000 processes) for findings nothing reads; only a stop of children all ended skipped it."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from launcher.arrivals import Arrivals
from launcher.child import Child, ChildSpec
from launcher.gang_stop import stop_gang
from tests.launcher.real_children import wait_until


def _stopped_shard(tmp_path, name: str, out) -> Child:
    """A real shard stand-in (``sleep``), stopped (SIGSTOP) as the stop begins."""
    spec = ChildSpec("server", 0, ["sleep", "30"], env=dict(os.environ))
    child = Child(spec, tmp_path / f"{name}.log", out, threading.Lock())
    os.kill(child.proc.pid, signal.SIGSTOP)
    stat = Path(f"/proc/{child.proc.pid}/stat")
    wait_until(lambda: stat.read_text().rsplit(")", 1)[1].split()[0] == "T", "not stopped")
    return child


@pytest.mark.timeout(30)
@pytest.mark.parametrize("find_stopped", [True, False], ids=["a-failure", "a-success"])
def test_a_stop_with_no_failure_to_report_looks_for_no_stopped_process(tmp_path, find_stopped):
    with open(tmp_path / "out", "wb") as out:
        child = _stopped_shard(tmp_path, "server-0", out)
        try:
            said: list[str] = []
            findings = stop_gang([child], 10, 0.02, Arrivals(), said.append, None, find_stopped)
        finally:
            child.signal_group(signal.SIGKILL)
            child.finish()
    assert [c for c, _ in findings.stopped] == ([child] if find_stopped else []), findings
    assert child.poll() == -signal.SIGTERM, child.poll()  # let run to its SIGTERM either way
