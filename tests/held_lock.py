"""A transient setup failure that a restart gets past: an output directory's lock held by this
(the test's) process through a launch's first attempt, whose rank 0 is refused it (``runs/x is
in use by pid N on HOST; ...``, a RunDirError before its sync's setup, which the launcher
restarts), and let go when the restart's rank 0 asks for it (:data:`ASK_FOR_THE_LOCK`)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from distconv.files import hold_lock
from distconv.run_files import CLAIM, LOCK

#: lines of a script (indented for its ``main``'s ``try``, ``restart`` and ``sync`` set, ``os``,
#: ``time`` and ``Path`` imported) that ``OUT`` names the output directory of: at restart 1 its
#: rank 0 asks for :func:`held_until_asked`'s lock and waits (up to 20 s) until it is let go
ASK_FOR_THE_LOCK = """\
        if restart == 1 and sync.rank == 0:
            Path(OUT + ".release").touch()
            deadline = time.monotonic() + 20
            while not Path(OUT + ".free").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
"""


@contextmanager
def held_until_asked(out: Path, job: str | None = None, seconds: float = 60.0) -> Iterator[None]:
    """Hold ``out``'s lock (``out`` made) from a thread of this process until ``OUT.release``
    appears (:data:`ASK_FOR_THE_LOCK`), then let it go and write ``OUT.free``; let go at the
    block's end (or after ``seconds``) all the same, the thread joined. Its claim names the
    launch's ``job`` (``--job-id``) where given, as the attempt before's would: a holder of
    another job ends the launch unrestarted (:mod:`launcher.out_holder`); none is written
    where no launch is about (a command that only reads the run)."""
    out.mkdir(parents=True, exist_ok=True)
    held = hold_lock(out / LOCK)
    if job is not None:
        (out / CLAIM).write_text(json.dumps({"job": job, "launch": None}))
    asked, free = Path(f"{out}.release"), Path(f"{out}.free")
    done = threading.Event()

    def let_go() -> None:
        deadline = time.monotonic() + seconds
        while not asked.exists() and not done.is_set() and time.monotonic() < deadline:
            time.sleep(0.02)
        os.close(held)  # the flock goes with its descriptor
        free.touch()

    thread = threading.Thread(target=let_go, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
