"""``ps_train_crash.py`` (rank 1 raises a simulated out-of-memory error in its 6th step), with
rank 1's exit delayed by DELAY seconds once its traceback is out (an ``atexit`` sleep): the
rank left waiting, which the shard's error reply stops at once, exits first, as it often does
by itself. Each rank writes its exit time to ``OUT/exit-<rank>``. ``python
ps_train_crash_late.py OUT DELAY``."""

from __future__ import annotations

import atexit
import os
import sys
import time
from pathlib import Path

from ps_train_crash import _failing_on_rank_1

from distconv import trainer
from distconv.cli import main


def _exiting(out: Path, rank: str, delay: float) -> None:
    time.sleep(delay)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"exit-{rank}").write_text(repr(time.time()))


if __name__ == "__main__":
    out, delay = Path(sys.argv[1]), float(sys.argv[2])
    rank = os.environ["RANK"]
    atexit.register(_exiting, out, rank, delay if rank == "1" else 0.0)
    trainer.Trainer.train_step = _failing_on_rank_1
    argv = ["train", "--data", "synthetic", "--batch-size", "8", "--epochs", "3"]
    sys.exit(main([*argv, "--no-progress", "--out", str(out)]))
