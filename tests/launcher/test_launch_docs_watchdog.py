"""The docs say whom the MPI watchdog's stop names: the rank that waited.

README ("Many workers") and docs/operations.md ("When a rank does not come") said it names
"the call and the rank", read as the rank that did not come; the message names the rank that
waited, and a collective's ``Wait`` cannot tell which rank has not joined it.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from distconv.sync.mpi.watchdog import Watchdog

REPO_ROOT = Path(__file__).resolve().parents[2]


def _flat(path: str) -> str:
    return " ".join((REPO_ROOT / path).read_text(encoding="utf-8").split())


@pytest.mark.timeout(30)
def test_the_watchdogs_stop_names_the_rank_that_waited_and_no_other():
    stopped: list[str] = []
    done = threading.Event()

    def stop_job(message: str) -> None:
        stopped.append(message)
        done.set()  # the watched wait returns: no sleep, no stray thread

    watchdog = Watchdog(0.2, stop_job, rank=1)
    try:
        watchdog.call("the Wait of an Iallreduce", done.wait, 10)
    finally:
        watchdog.close()
    (message,) = stopped
    assert message.startswith("waited ") and "the Wait of an Iallreduce (setup)" in message
    assert "for a rank that has not joined it" in message
    assert not re.search(r"\brank \d", message), message  # the missing rank is not named


def test_the_docs_say_the_rank_named_is_the_one_that_waited():
    readme, ops = _flat("README.md"), _flat("docs/operations.md")
    assert "naming the call and the rank that waited, as a collective cannot tell" in readme
    assert "naming the call and the rank (" not in readme
    section = ops[ops.index("### When a rank does not come") :]
    assert "- the rank that waited, not the one it waited for:" in section
    assert "- the rank. " not in section
