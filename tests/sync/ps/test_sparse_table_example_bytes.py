"""``examples/sparse_table.py``'s closing bytes line through a parameter server counts the
steps apart from what moves around them.

The line said "N in 1 epoch(s) of 16 steps, start-up included", while N held each checkpoint's
optimizer state too (Adam's two moments of the 12.8 MB table: 25.6 MB an epoch with ``--out``)
and, in async mode, each epoch end's pull of the whole table: a reader comparing it with "a
dense table moves 25600000 a step" could not tell the sparse steps' cost. The steps' bytes
are now counted from before the first step to each epoch's last, and the whole named apart.
A real shard on 127.0.0.1 and the real example, with and without a checkpoint, for two epochs:
the first epoch's evaluation and checkpoint lie between two steps, which one epoch never shows.
"""

from __future__ import annotations

import os
import re
import sys

import pytest
from ps_helpers import REPO_ROOT

from tests.child_env import child_path
from tests.processes import run_job

pytestmark = pytest.mark.timeout(180)

TABLE = 100_000 * 32 * 4  # the example's float32 table, in bytes


def _line(table: int) -> re.Pattern[str]:
    """The closing line of two epochs through a server, for a table of ``table`` bytes."""
    return re.compile(
        r"bytes moved by rank 0: (\d+) in 2 epoch\(s\) of 8 steps; a dense table moves "
        rf"{2 * table} a step; (\d+) in all, with start-up \(rank 0 seeds the servers with the "
        rf"{table}-byte table once\), the test set's rows, each checkpoint's optimizer state "
        "and, in async mode, each epoch end's pull of the whole table"
    )


def _bytes(shards, tmp_path, *args: str, table: int = TABLE) -> tuple[int, int]:
    """The example's steps' bytes and its bytes in all, as its closing line says them, for two
    epochs of 8 steps of Adam on a fresh shard of one worker; ``table``: the table's bytes the
    line names (the float32 table's unless ``args`` ask for another ``--dtype``)."""
    (endpoint,) = shards.start(1, workers=1)
    env = {**os.environ, "PYTHONPATH": child_path(), "OMP_NUM_THREADS": "1"}
    env.update(RANK="0", WORLD_SIZE="1", DISTCONV_PSERVERS=endpoint, DISTCONV_INSECURE="1")
    example = str(REPO_ROOT / "examples" / "sparse_table.py")
    argv = [sys.executable, example, "--epochs", "2", "--examples", "512", *args]
    done = run_job(argv, env, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    found = _line(table).search(done.stdout)
    assert found, done.stdout
    return int(found[1]), int(found[2])


def test_the_steps_bytes_leave_out_start_up_evaluation_and_checkpoints(shards, tmp_path):
    steps, in_all = _bytes(shards, tmp_path)
    saved_steps, saved_in_all = _bytes(shards, tmp_path, "--out", str(tmp_path / "run"))
    # the checkpoint's state is not the steps', that of the first epoch's end either, before
    # the second epoch's first step
    assert saved_steps == steps
    assert saved_in_all - in_all >= 4 * TABLE  # it is in all: Adam's m and v, 2 checkpoints
    assert in_all > TABLE + steps  # start-up: rank 0 seeds the shard with the table
    assert 0 < steps < 2 * TABLE / 50  # 16 sparse steps: under a fiftieth of one dense step


def test_a_float64_table_is_set_against_its_own_bytes(shards, tmp_path):
    """``--dtype float64`` (``distconv train``'s flag) doubles the table: the line names its
    bytes, not the float32 table's."""
    steps, in_all = _bytes(shards, tmp_path, "--dtype", "float64", table=2 * TABLE)
    assert in_all > 2 * TABLE + steps  # start-up: rank 0 seeds the shard with that table
