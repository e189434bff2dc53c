"""After a second stop signal, a log write under way is not said to reach the log whole.
6acfa440 judged such a write hung only once it had been under way 5 s (a slow file
system is drained at the end), but a write that a hung file system had held a moment then
fell to the "passed on slowly" words: "its log gets them all (drained there at the launcher's
end)", though the end's drain, bounded, could not take them, and said so next ("its pipe was
not drained within 2 s ... lacks what it still held")."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from launcher.child import Child, ChildSpec
from tests.launcher.real_children import OUTPUT_NAME, log_write_hung, wait_until

#: a child with no stray: a line, its last words (the write that hangs), and its end
CHILD = "import os; os.write(1, b'step 1\\nfatal: boom\\n'); os._exit(3)"


@pytest.mark.timeout(30)
def test_a_log_write_under_way_at_a_second_signal_is_not_said_to_reach_the_log(
    tmp_path, monkeypatch
):
    spec = ChildSpec("worker", 0, [sys.executable, "-c", CHILD])
    with log_write_hung(monkeypatch, b"fatal"), open(tmp_path / OUTPUT_NAME, "wb") as out:
        child = Child(spec, tmp_path / "worker-0.log", out, threading.Lock())
        wait_until(lambda: child.poll() is not None, "the child did not exit")
        time.sleep(0.2)  # the pump in its log write a while: under 5 s, not hung by that bar
        child.finish(lambda: True)  # a second stop signal came
        said = child.output_held
        assert not child.drain_log(0.2)  # the end's drain: the write does not end
    assert said == (
        f"worker-0: a write to '{child.log_path}' was under way at the second stop signal (a "
        "slow file system, or a hung one), so worker-0's last lines are missing from "
        "failure.json and the launcher's output; the launcher's end drains the rest into the "
        "log, if it takes them in time"
    )  # was "... passed on slowly ... worker-0.log gets them all (drained there ...)"
