"""2 ranks under a real ``mpiexec`` end with the weights of 1 process training on the whole batch.

Float64, stride-sharded global batches with an uneven last one, SGD and Adam, with and without
the communication thread, with one bucket and with many. Each test starts its own ``mpiexec``.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.mpi.common import (
    NEEDS_MPIEXEC,
    max_relative,
    params_of,
    reference,
    run_ranks,
    small_lenet,
    weights,
)

pytestmark = NEEDS_MPIEXEC
mpi4py = pytest.importorskip("mpi4py", reason="mpi4py is not installed")


#: a piece plan with many pieces of growing sizes on the small LeNet
GROWING = ("--first-piece-bytes", "64", "--piece-bytes", "1024")
#: pieces small enough that several buckets of 600 bytes go in more than one
STREAMING = ("--first-piece-bytes", "64", "--piece-bytes", "256")


def run_two(tmp_path, optimizer: str, *options: str) -> list[dict[str, np.ndarray]]:
    return run_ranks(tmp_path, optimizer, *options)[0]


@pytest.mark.parametrize(
    "optimizer, options",
    [
        ("sgd", ("--overlap", "0")),
        ("adam", ("--overlap", "0")),
        ("sgd", ("--overlap", "1", "--bucket-bytes", "300")),
        ("adam", ("--overlap", "1", "--bucket-bytes", "300")),
        ("adam", ("--overlap", "0", "--bucket-bytes", "300")),
        # each bucket on the wire in many pieces, one at a time (the optimizer averages after)
        ("adam", ("--overlap", "0", "--bucket-bytes", "2000", "--piece-bytes", "256")),
        ("sgd", ("--overlap", "1", "--bucket-bytes", "2000", "--piece-bytes", "256")),
        # pieces that grow, each going as soon as the gradients under it are in
        ("adam", ("--overlap", "0", "--bucket-bytes", "2000", *GROWING)),
        # several buckets streaming in pieces, laid out against the firing order: a gradient
        # counts at the pieces of the whole layout, not those of its bucket's numbering
        ("adam", ("--overlap", "0", "--bucket-bytes", "600", *STREAMING, "--forward-layout")),
        # the same on the thread, pieces handed to it as they fill, the layout's last ones cut
        # small: the thread reduces pieces in the order it is handed them, the same everywhere
        ("sgd", ("--overlap", "1", "--bucket-bytes", "600", *STREAMING, "--forward-layout")),
        (
            "adam",
            ("--overlap", "1", "--bucket-bytes", "2000", *GROWING, "--last-piece-bytes", "64"),
        ),
    ],
)
def test_two_ranks_equal_one_process_with_twice_the_batch(tmp_path, optimizer, options):
    ranks = run_two(tmp_path, optimizer, *options)
    expected = reference(optimizer)
    for name in expected:  # every rank ends identical, bitwise
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name])
    assert max_relative(params_of(ranks[0]), expected) <= 1e-10
    # the step really moved the weights, so the comparison means something
    assert max_relative(expected, weights(small_lenet(seed=0))) > 1e-3
    if "300" in options:
        assert int(ranks[0]["_buckets"]) > 3
    if "256" in options or "64" in options:
        assert int(ranks[0]["_pieces"]) > 2 * int(ranks[0]["_buckets"])
    if "--forward-layout" in options:
        assert int(ranks[0]["_streaming"]) >= 2
    # mpi4py initialises MPI at THREAD_MULTIPLE, so the thread asked for really ran
    assert bool(ranks[0]["_overlap"]) is (options[1] == "1")


def test_repeated_run_is_bitwise_equal(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = run_two(tmp_path / "a", "adam", "--overlap", "1", "--bucket-bytes", "300")
    second = run_two(tmp_path / "b", "adam", "--overlap", "1", "--bucket-bytes", "300")
    for name in first[0]:
        np.testing.assert_array_equal(first[0][name], second[0][name])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("optimizer, overlap", [("sgd", "0"), ("adam", "1")])
def test_three_ranks_equal_one_process_and_repeat_bitwise(tmp_path, optimizer, overlap):
    """With three ranks the order of a sum's additions can change its last bits, and MPI may
    pick its algorithm by message size: the pieces depend on sizes alone, so every run adds
    alike."""
    options = ("--overlap", overlap, "--bucket-bytes", "2000", *GROWING)
    runs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        runs.append(run_ranks(tmp_path / name, optimizer, *options, ranks=3)[0])
    expected = reference(optimizer)
    for ranks in runs:
        for other in ranks[1:]:
            for name in expected:
                np.testing.assert_array_equal(ranks[0][name], other[name])
        assert max_relative(params_of(ranks[0]), expected) <= 1e-10
    for name in runs[0][0]:
        np.testing.assert_array_equal(runs[0][0][name], runs[1][0][name])
    assert int(runs[0][0]["_pieces"]) > 2 * int(runs[0][0]["_buckets"])
