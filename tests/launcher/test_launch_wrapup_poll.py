"""The wrap-up of a child that reported its end but stays, under a :class:`Supervisor` whose
looks are further apart than :data:`launcher.child.LAUNCHER_GAP_SECONDS`: the gap between two
ordinary looks is not time the launcher was stopped, so such a child is still stopped."""

from __future__ import annotations

import sys
import time

import pytest

import launcher.child
from launcher.child_spec import ChildSpec
from launcher.failure import TailReader
from launcher.supervisor import Supervisor

#: the child's own end, well after its wrap-up: it bounds the test where it is not stopped
STAYS_SECONDS = 15
#: reports its end, then stays
STAYS = f"import time\nprint('THE END', flush=True)\ntime.sleep({STAYS_SECONDS})\n"


@pytest.mark.timeout(60)
def test_a_child_that_stays_is_stopped_though_the_looks_are_over_a_second_apart(
    tmp_path, monkeypatch
):
    """``Supervisor(poll=1.5)``: every look came over LAUNCHER_GAP_SECONDS after the last, so
    each was counted as the launcher having been stopped, the deadline moved each time, and a
    child stuck after its report was never stopped (here: it ran to its own end, 15 s)."""
    monkeypatch.setattr(launcher.child, "WRAPUP_SECONDS", 1.0)
    reader = TailReader(cause=lambda _tail: None, ends=lambda line: line == "THE END")
    spec = ChildSpec("mpiexec", 0, [sys.executable, "-c", STAYS], reader=reader)
    with (tmp_path / "err").open("wb") as err:
        supervisor = Supervisor(tmp_path / "run", grace=2, out=err, err=err, poll=1.5)
        start = time.monotonic()
        status = supervisor.run(lambda _restart: [spec])
        took = time.monotonic() - start
    said = (tmp_path / "err").read_text()
    assert "mpiexec 0 did not exit 1 s after it reported the job's end" in said, said
    assert status == 143, said
    assert took < STAYS_SECONDS - 5, took
