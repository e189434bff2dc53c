"""``distconv train`` on the parameter server with rank 1 running another job (batch size 16,
the others 8): every rank stops on the mismatch. ``python ps_train_other_job.py OUT``."""

from __future__ import annotations

import os
import sys

from distconv.cli import main

if __name__ == "__main__":
    batch = "16" if os.environ["RANK"] == "1" else "8"
    argv = ["train", "--data", "synthetic", "--batch-size", batch, "--epochs", "1"]
    sys.exit(main([*argv, "--no-progress", "--out", sys.argv[1]]))
