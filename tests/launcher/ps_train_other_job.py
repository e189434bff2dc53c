"""``distconv train`` (on the parameter server, or MPI's ranks) with rank 1 running another job
(batch size 16, the others 8): every rank stops on the mismatch. ``python ps_train_other_job.py
OUT [TRAIN OPTIONS]``."""

from __future__ import annotations

import os
import sys

from distconv.cli import main

if __name__ == "__main__":
    ranks = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK")  # distconv-launch local's, MPI's
    batch = "16" if next(os.environ[r] for r in ranks if r in os.environ) == "1" else "8"
    argv = ["train", "--data", "synthetic", "--batch-size", batch, "--epochs", "1"]
    sys.exit(main([*argv, "--no-progress", "--out", sys.argv[1], *sys.argv[2:]]))
