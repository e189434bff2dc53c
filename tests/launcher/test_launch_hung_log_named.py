"""Where a child's log stops taking writes (a hung network file system), the launcher gives up
on its output and says so: it said that a process that left the child's group holds the
child's output, where no such process was, and the lines were missing for another reason.
Also where the write began only during the launcher's waits for the pump's answer (the pump
run late, then held up): that said "its output is passed on slowly ... they still reach the
output and the log"."""

from __future__ import annotations

import sys

import pytest

import launcher.child
from launcher.child import ChildSpec
from tests.launcher.real_children import (
    log_write_hung,
    reading_after_unanswered_waits,
    run_to_exit,
)

#: a child with no stray: it prints a line and its last words, and dies
CHILD = "import os; os.write(1, b'step 1\\nfatal: boom'); os._exit(3)"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("run_late", [False, True], ids=["begun-before", "begun-in-the-waits"])
def test_a_log_write_that_does_not_end_is_named_not_a_stray(tmp_path, monkeypatch, run_late):
    monkeypatch.setattr(launcher.child, "OUTPUT_DRAIN_SECONDS", 0.05)  # the product's 5 s
    if run_late:  # the pump reads, so writes, once the launcher's first wait for it ran out
        reading_after_unanswered_waits(monkeypatch, 1)
    with log_write_hung(monkeypatch, b"fatal"):
        child = run_to_exit(tmp_path, ChildSpec("worker", 0, [sys.executable, "-c", CHILD]))
        said = child.output_held
    child._pump.join(10)
    assert said == (
        f"worker-0: a write to '{child.log_path}' has not ended (a hung file system?), so "
        "worker-0's last lines are missing from it, from the launcher's output and from "
        "failure.json"
    )  # was "... a process that left its process group ..."; run late, "... passed on slowly"
    assert child.log_path.read_bytes() == b"step 1\nfatal: boom\n"  # once it ends
