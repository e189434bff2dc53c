"""A sparse table's update on the shards is "lazy" (protocol.md, Sparse rows): the rows a step
did not read keep their values and their momentum / Adam moments, and Adam's step count is per
block, advancing when a row of the block is read. Checked against numpy written from those
words, through a real shard (the other sparse tests use plain SGD, where lazy equals dense, or
compare the shards with themselves)."""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import PER_ROW
from distconv.sync.ps.client import PServerSync

ROWS, WIDTH, LR = 8, 2, 0.1
STEPS = [[1, 2], [2, 5], [6]]  # rows read; blocks are rows 0:4 and 4:8


def _grad(step: int, row: int) -> np.ndarray:
    return np.array([1.0 + step - 0.5 * row, 0.25 * row - step])


def _lazy(name: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The table and state after STEPS, by the documented rule, in plain numpy."""
    w = np.arange(ROWS * WIDTH, dtype=np.float64).reshape(ROWS, WIDTH)
    a, b = np.zeros_like(w), np.zeros_like(w)  # velocity, or Adam's m and v
    t = np.zeros(ROWS, np.int64)  # Adam's step of each row's block
    for step, rows in enumerate(STEPS):
        blocks = {r // 4 for r in rows}
        t[[r for r in range(ROWS) if r // 4 in blocks]] += 1
        for r in rows:
            g = _grad(step, r)
            if name == "momentum":
                a[r] = 0.9 * a[r] + g
                w[r] -= LR * a[r]
            else:
                a[r] = 0.9 * a[r] + 0.1 * g
                b[r] = 0.999 * b[r] + 0.001 * g * g
                m_hat, v_hat = a[r] / (1 - 0.9 ** t[r]), b[r] / (1 - 0.999 ** t[r])
                w[r] -= LR * m_hat / (np.sqrt(v_hat) + 1e-8)
    if name == "momentum":
        return w, {"velocity": a}
    return w, {"m": a, "v": b, "step": t.max(), "step" + PER_ROW: t}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["momentum", "adam"])
def test_rows_not_read_keep_their_values_and_moments(shards, name):
    table = Parameter(
        "t", np.arange(ROWS * WIDTH, dtype=np.float64).reshape(ROWS, WIDTH), sparse_rows=True
    )
    sync = PServerSync(
        create_optimizer(name, lr=LR),
        rank=0,
        world_size=1,
        pservers=shards.start(1, workers=1),
        insecure=True,
        timeout=20,
        block_bytes=4 * WIDTH * 8,
    )
    try:
        sync.setup([table])
        for step, rows in enumerate(STEPS):
            sync.start_step(1)
            sync.prefetch({"t": np.array(rows)})
            for r in rows:
                table.grad[r] = _grad(step, r)
            table.inc_update(sync.on_gradient)
            sync.finish_step()
        state = sync.state_dict()["t"]
    finally:
        sync.close()
    want_w, want_state = _lazy(name)
    np.testing.assert_allclose(table.value, want_w, rtol=1e-13, atol=1e-13)
    assert state.keys() == want_state.keys()
    for key, want in want_state.items():
        np.testing.assert_allclose(state[key], want, rtol=1e-13, atol=1e-15, err_msg=key)
    # rows 0, 3, 4, 7 were never read: as seeded, with no moments
    np.testing.assert_array_equal(table.value[[0, 3, 4, 7]], want_w[[0, 3, 4, 7]])
