"""Workers that exit in an order set by events, not by sleeps from their start: each records
its pid in a folder, and a cause waits for its victims' exits before its own. Sleeps from the
start were raced by a victim started (or stopped) late on a loaded host, which then exited
after its cause: stopped by the launcher, no victim.

``python exits_in_order.py FOLDER RANK CODE [RANKS...]``: record the pid, exit ``CODE`` once
the workers ``RANKS`` of ``FOLDER`` have exited (:data:`MARGIN` later), or at once
(:data:`ALONE` s) without them.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path

#: seconds a cause waits past its victims' exits: the supervisor's waiter threads, which time
#: each exit, must note theirs before its own, also on a loaded host
MARGIN = 0.5
#: seconds a worker with no one to wait for lives: the others have started meanwhile
ALONE = 0.2


def record_pid(folder: Path, rank: int | str) -> None:
    """Say this process's pid as ``FOLDER/<rank>.pid``, whole when it appears."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"{rank}.tmp"
    tmp.write_text(str(os.getpid()))
    tmp.rename(folder / f"{rank}.pid")


def exited(folder: Path, rank: int | str) -> bool:
    """True once the worker ``rank`` of ``folder`` said its pid and has exited (gone, or a
    zombie: the supervisor keeps its children so with WNOWAIT until it has timed them)."""
    pid = folder / f"{rank}.pid"
    if not pid.exists():
        return False
    try:
        stat = Path(f"/proc/{pid.read_text()}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait_exited(folder: Path, ranks: Iterable[int | str], seconds: float = 30) -> None:
    """Return once the workers ``ranks`` have exited, :data:`MARGIN` later; exits with a
    message after ``seconds``: a victim that never goes is the test's failure, not a hang."""
    ranks = list(ranks)
    deadline = time.monotonic() + seconds
    while not all(exited(folder, rank) for rank in ranks):
        if time.monotonic() > deadline:
            sys.exit(f"workers {ranks} never exited")
        time.sleep(0.01)
    time.sleep(MARGIN)


def main(argv: list[str]) -> int:
    folder, rank, code, *ranks = argv
    record_pid(Path(folder), rank)
    if ranks:
        wait_exited(Path(folder), ranks)
    else:
        time.sleep(ALONE)
    return int(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
