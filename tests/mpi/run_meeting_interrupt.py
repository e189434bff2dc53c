"""mpiexec -n 2 python -m mpi4py run_meeting_interrupt.py OUT WHAT: a meeting between steps
(``WHAT``: ``barrier``, ``sum``, ``broadcast`` or ``compare``: ``all_equal`` outside setup)
that rank 1 reaches 1 s late, and rank 0 gets a SIGINT 0.3 s into its wait in the meeting's
exchange (a real Ctrl-C, raised by Python once that wait returns). Each rank writes what the
meeting raised to ``OUT/said<rank>.txt`` (``nothing`` where nothing was), goes on (a caught
Ctrl-C) with one step (:func:`~tests.mpi.common.step_and_save`: ``OUT/values<rank>.npz``),
then closes. A rank that fails otherwise writes ``OUT/rank<r>.err``. ``never`` after WHAT:
rank 1 never reaches the meeting (it sleeps a minute), rank 0 gets a second SIGINT 0.6 s in, and
the watchdog (2 s) must end the job: the hold over the meeting leaves that wait to it.
``close`` as WHAT: the last exchange, no step after it; each rank then writes
``OUT/left<rank>.txt`` a second later, unless an abort ended the job first. ``close-sigterm``:
the same with a SIGTERM in place of the SIGINT, rank 0's handler raising ``SystemExit(143)``
(as a script's own stop does), said as ``SystemExit: 143``; rank 0 also gets a SIGTERM as the
exchange's start returns, before its request is stored, and a SIGUSR1 (a signal close does
not hold, its handler raising as SIGTERM's does) as it reads the exchange's rows, once its
Wait returned (one that came a moment later).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tests.mpi.common import bucket_params, bucket_sync, recorded, step_and_save
from tests.mpi.run_check_interrupt import what_raises
from tests.mpi.run_start_interrupt import interrupted_after


def main() -> None:
    out, what, never = Path(sys.argv[1]), sys.argv[2], sys.argv[3:] == ["never"]
    sync, params = bucket_sync(timeout=2 if never else 5), bucket_params()
    meetings = {
        "barrier": sync.barrier,
        "sum": lambda: sync.allreduce_sum([1.0, 2.0]),
        "broadcast": sync.broadcast_parameters,
        "compare": lambda: sync.all_equal({"data": "the same"}),
        "close": sync.close,
        "close-sigterm": sync.close,
    }
    sent = signal.SIGINT
    if what == "close-sigterm" and sync.rank == 0:
        sent = signal.SIGTERM
        for signum in (sent, signal.SIGUSR1):
            signal.signal(signum, lambda *_: sys.exit(143))
    with recorded(sync, out):
        sync.setup(params, {})
        if sent == signal.SIGTERM:  # started and read next by close's exchange
            comm = sync._check.comm
            comm.Iallgather = interrupted_after(comm.Iallgather, signal.SIGTERM)
            sync._check._every = sync._check._every.view(SignalledRows)
        if sync.rank == 1:
            time.sleep(60.0 if never else 1.0)
        else:
            for after in (0.3, 0.6) if never else (0.3,):
                threading.Timer(after, os.kill, (os.getpid(), sent)).start()
        (out / f"said{sync.rank}.txt").write_text(said(meetings[what]))
        if what.startswith("close"):
            time.sleep(1.0)
            (out / f"left{sync.rank}.txt").write_text("left")
        else:
            step_and_save(sync, params, out)


class SignalledRows(np.ndarray):
    """The exchange's rows (its receive buffer), which send this process a SIGUSR1 the first
    time they are read, before they are: its handler runs there, the exchange made."""

    sent = False

    def tolist(self) -> Any:
        if not SignalledRows.sent:
            SignalledRows.sent = True
            os.kill(os.getpid(), signal.SIGUSR1)
        return super().tolist()


def said(meeting: Callable[[], None]) -> str:
    """:func:`what_raises`, a SystemExit said too (``SystemExit: <code>``)."""
    try:
        return what_raises(meeting)
    except SystemExit as exc:
        return f"SystemExit: {exc}"


if __name__ == "__main__":
    main()
