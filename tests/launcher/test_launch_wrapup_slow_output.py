"""The wrap-up of a child that reported its end, while the launcher's own output is slow: the
pump's waits on it are not the child's time, but only a stall (a paused pager) is left out in
full; an output that moves, slowly, is left out only up to the wrap-up's own length, so a child
that is stuck printing after its report is still stopped (:mod:`launcher.output_waits`)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

import launcher.child
from launcher.child_spec import ChildSpec
from launcher.failure import TailReader
from launcher.supervisor import Supervisor

#: the child's own end, well after its wrap-up: it bounds the test where it is not stopped (12 s
#: left too little room: a stopped child took 3.6 s alone, 8.6 s beside the suite on 2 cores,
#: 10.2 s from its start under a heavier load, most of it the child's own start; 11.2 s from its
#: report beside a whole suite and eight other test runs; the code before ran to the child's end)
STAYS_SECONDS = 40
#: reports its end, then prints the line ``{line}`` (Python) after another until its end (a
#: stuck mpiexec)
STUCK = (
    "import time\nprint('THE END', flush=True)\nt = time.time()\n"
    f"while time.time() - t < {STAYS_SECONDS}:\n    print({{line}}, flush=True)\n"
)
#: reports its end, then prints far more than a pipe holds, and exits
LATE = "print('THE END', flush=True)\nfor _ in range(3000):\n    print('late ' + 'x' * 70)\n"


def _run(tmp_path: Path, child: str, pause: float, delay: float) -> tuple[int, str, float]:
    """A Supervisor (WRAPUP_SECONDS: 1) over ``child`` (an mpiexec that reports its end by
    ``THE END``), its stdout a pipe that nothing reads for ``pause`` seconds, then read 4 KiB
    every ``delay`` seconds; its status, what it said, and the seconds from its report of its
    end (as the launcher read it: not the child's start, slow on a loaded machine) to the
    Supervisor's end."""
    read, write = os.pipe()

    def reader() -> None:
        time.sleep(pause)
        with os.fdopen(read, "rb") as pipe:
            while pipe.read(4096):
                time.sleep(delay)

    reading = threading.Thread(target=reader, daemon=True)
    reading.start()
    reported: list[float] = []

    def ends(line: str) -> bool:
        if line == "THE END" and not reported:
            reported.append(time.monotonic())
        return line == "THE END"

    reader_spec = TailReader(cause=lambda _tail: None, ends=ends)
    spec = ChildSpec("mpiexec", 0, [sys.executable, "-c", child], reader=reader_spec)
    with os.fdopen(write, "wb") as out, (tmp_path / "err").open("wb") as err:
        status = Supervisor(tmp_path / "run", grace=2, out=out, err=err).run(lambda _r: [spec])
        took = time.monotonic() - reported[0]
    reading.join(timeout=10)
    return status, (tmp_path / "err").read_text(), took


@pytest.mark.timeout(90)
@pytest.mark.parametrize("line", ["'error: stuck'", "'x' * 1_000_000"], ids=["short", "1MB"])
def test_a_child_stuck_printing_into_a_slow_output_is_stopped(tmp_path, monkeypatch, line):
    """The child prints after its report until its end, into an output read at about 400 KB/s
    (a terminal over ssh): its pump waits on that output almost all the time. Every such wait
    was left out of its wrap-up, and none counted while under way, so it was stopped only when
    a look fell between two writes: after 13 s and more, growing with a slower reader (here
    the child ran to its own end). Lines of 1 MB, each 2.5 s on that output, made every write
    a stall (over OUTPUT_STALL_SECONDS), left out in full: the child was never stopped."""
    monkeypatch.setattr(launcher.child, "WRAPUP_SECONDS", 1.0)
    # the launcher's end waits this long on its lines queued for the slow output
    monkeypatch.setattr(launcher.child, "OUTPUT_DRAIN_SECONDS", 0.5)
    status, said, took = _run(tmp_path, STUCK.format(line=line), pause=0.0, delay=0.01)
    assert "mpiexec 0 did not exit 1 s after it reported the job's end" in said, said
    assert status == 143, said
    assert took < STAYS_SECONDS / 2, took  # 1 s of its own, at most 1 s of waits, the stop


@pytest.mark.timeout(60)
def test_a_stall_longer_than_twice_the_wrapup_is_not_the_childs_time(tmp_path, monkeypatch):
    """The output is not read for 3.5 s (a paused pager) while the child has 230 KB to print
    after its report, then read at once: the stall is left out in full, beyond the bound on
    shorter waits, so the child gets its lines out and exits, as it would have at once."""
    monkeypatch.setattr(launcher.child, "WRAPUP_SECONDS", 1.0)
    status, said, _ = _run(tmp_path, LATE, pause=3.5, delay=0.0)
    assert "did not exit" not in said, said
    assert status == 0, said
