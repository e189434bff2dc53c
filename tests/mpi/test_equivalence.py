"""2 ranks under a real ``mpiexec`` end with the weights of 1 process training on the whole batch.

Float64, stride-sharded global batches with an uneven last one, SGD and Adam, with and without
the communication thread, with one bucket and with many. Each test starts its own ``mpiexec``.
"""

from __future__ import annotations

import numpy as np
import pytest

from distconv.optim import create_optimizer
from distconv.sync.local import LocalSync
from tests.mpi.common import mpiexec, run_mpi, script, small_lenet, train, weights

pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(mpiexec() is None, reason="mpiexec is not installed"),
]
mpi4py = pytest.importorskip("mpi4py", reason="mpi4py is not installed")


def reference(optimizer: str) -> dict[str, np.ndarray]:
    """One process, LocalSync, the whole global batch each step."""
    net = small_lenet(seed=0)
    sync = LocalSync(create_optimizer(optimizer))
    sync.setup(net.parameters(), {})
    train(net, sync)
    return weights(net)


def run_ranks(tmp_path, optimizer: str, *options: str) -> list[dict[str, np.ndarray]]:
    """Train under ``mpiexec -n 2``; returns each rank's saved arrays."""
    proc = run_mpi(["-n", "2", *script("run_train.py"), str(tmp_path), optimizer, *options])
    assert proc.returncode == 0, proc.stderr
    return [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(2)]


def max_relative(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    """The largest ``max|a - b| / max(|a|, |b|)`` over the parameters."""
    return max(
        float(np.abs(a[k] - b[k]).max() / max(np.abs(a[k]).max(), np.abs(b[k]).max(), 1e-300))
        for k in b
    )


def params_of(saved: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v for k, v in saved.items() if not k.startswith("_")}


@pytest.mark.parametrize(
    "optimizer, options",
    [
        ("sgd", ("--overlap", "0")),
        ("adam", ("--overlap", "0")),
        ("sgd", ("--overlap", "1", "--bucket-bytes", "300")),
        ("adam", ("--overlap", "1", "--bucket-bytes", "300")),
        ("adam", ("--overlap", "0", "--bucket-bytes", "300")),
    ],
)
def test_two_ranks_equal_one_process_with_twice_the_batch(tmp_path, optimizer, options):
    ranks = run_ranks(tmp_path, optimizer, *options)
    expected = reference(optimizer)
    for name in expected:  # every rank ends identical, bitwise
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name])
    assert max_relative(params_of(ranks[0]), expected) <= 1e-10
    # the step really moved the weights, so the comparison means something
    assert max_relative(expected, weights(small_lenet(seed=0))) > 1e-3
    if "300" in options:
        assert int(ranks[0]["_buckets"]) > 3


def test_repeated_run_is_bitwise_equal(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = run_ranks(tmp_path / "a", "adam", "--overlap", "1", "--bucket-bytes", "300")
    second = run_ranks(tmp_path / "b", "adam", "--overlap", "1", "--bucket-bytes", "300")
    for name in first[0]:
        np.testing.assert_array_equal(first[0][name], second[0][name])


def test_float16_wire_halves_the_bytes_and_stays_close(tmp_path):
    (tmp_path / "f64").mkdir()
    (tmp_path / "f16").mkdir()
    full = run_ranks(tmp_path / "f64", "sgd", "--grad-dtype", "float32")
    half = run_ranks(tmp_path / "f16", "sgd", "--grad-dtype", "float16")
    for name in params_of(half[0]):  # the 16-bit sum is the same on every rank
        np.testing.assert_array_equal(half[0][name], half[1][name])
    assert int(half[0]["_wire_bytes"]) * 2 == int(full[0]["_wire_bytes"])
    error = max_relative(params_of(half[0]), params_of(full[0]))
    assert 0 < error < 1e-3
