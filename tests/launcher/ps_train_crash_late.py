"""``ps_train_crash.py`` (rank 1 raises a simulated out-of-memory error in its 6th step), with
rank 1's exit held, once its traceback is out (an ``atexit`` hook), until rank 0 has exited:
the rank left waiting, which the shard's error reply stops, exits first, as it often does by
itself. An event, not a delay: a fixed 1 s was raced by a rank 0 slow to exit on a loaded
host. Each rank records its pid in ``OUT/pids`` and writes its exit time to
``OUT/exit-<rank>``. ``python ps_train_crash_late.py OUT``."""

from __future__ import annotations

import atexit
import os
import sys
import time
from pathlib import Path

from exits_in_order import record_pid, wait_exited
from ps_train_crash import _failing_on_rank_1

from distconv import trainer
from distconv.cli import main


def _exiting(out: Path, rank: str) -> None:
    if rank == "1":
        wait_exited(out / "pids", ["0"])
    (out / f"exit-{rank}").write_text(repr(time.time()))


if __name__ == "__main__":
    out = Path(sys.argv[1])
    rank = os.environ["RANK"]
    record_pid(out / "pids", rank)
    atexit.register(_exiting, out, rank)
    trainer.Trainer.train_step = _failing_on_rank_1
    argv = ["train", "--data", "synthetic", "--batch-size", "8", "--epochs", "3"]
    sys.exit(main([*argv, "--no-progress", "--out", str(out)]))
