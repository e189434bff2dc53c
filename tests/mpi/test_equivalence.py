"""2 ranks under a real ``mpiexec`` end with the weights of 1 process training on the whole batch.

Float64, stride-sharded global batches with an uneven last one, SGD and Adam, with and without
the communication thread, with one bucket and with many. Each test starts its own ``mpiexec``.
"""

from __future__ import annotations

import numpy as np
import pytest

from distconv.equivalence import mismatch
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
#: the production plan (1 MiB pieces, 4 MiB buckets, with the thread the default 128 KiB last
#: piece) on a LeNet of about 330 KiB of float64 weights: its one bucket's end is cut
DEFAULT_CUT = ("--last-piece-bytes", "0", "--channels", "32", "128")
#: the last piece's elements with DEFAULT_CUT (128 KiB of float64)
CUT_ELEMENTS = (128 << 10) // 8


def channels_of(options: tuple[str, ...]) -> tuple[int, ...]:
    """The LeNet's channels that ``options`` ask ``run_train.py`` for."""
    if "--channels" not in options:
        return (2, 3)
    at = options.index("--channels")
    return tuple(int(c) for c in options[at + 1 : at + 3])


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
        # the same on the thread, pieces handed to it as they fill: the thread reduces pieces
        # in the order it is handed them, the same everywhere
        ("sgd", ("--overlap", "1", "--bucket-bytes", "600", *STREAMING, "--forward-layout")),
        # the layout's last pieces cut small, halving down to 64 bytes
        (
            "adam",
            ("--overlap", "1", "--bucket-bytes", "2000", *GROWING, "--last-piece-bytes", "64"),
        ),
        # the production plan, its last piece the default 128 KiB
        ("sgd", ("--overlap", "1", *DEFAULT_CUT)),
    ],
)
def test_two_ranks_equal_one_process_with_twice_the_batch(tmp_path, optimizer, options):
    ranks = run_two(tmp_path, optimizer, *options)
    expected = reference(optimizer, channels_of(options))
    for name in expected:  # every rank ends identical, bitwise
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name])
    assert mismatch(expected, params_of(ranks[0])) is None
    # the step really moved the weights, so the comparison means something
    assert max_relative(expected, weights(small_lenet(0, channels_of(options)))) > 1e-3
    if options[-len(DEFAULT_CUT) :] == DEFAULT_CUT:
        assert int(ranks[0]["_last_piece"]) == CUT_ELEMENTS
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
@pytest.mark.parametrize(
    "optimizer, options",
    [
        ("sgd", ("--overlap", "0", "--bucket-bytes", "2000", *GROWING)),
        ("adam", ("--overlap", "1", "--bucket-bytes", "2000", *GROWING)),
        ("adam", ("--overlap", "1", *DEFAULT_CUT)),
    ],
)
def test_three_ranks_equal_one_process_and_repeat_bitwise(tmp_path, optimizer, options):
    """With three ranks the order of a sum's additions can change its last bits, and MPI may
    pick its algorithm by message size: the pieces depend on sizes and settings alone, so every
    run adds alike, the default small last piece included."""
    runs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        runs.append(run_ranks(tmp_path / name, optimizer, *options, ranks=3)[0])
    expected = reference(optimizer, channels_of(options))
    for ranks in runs:
        for other in ranks[1:]:
            for name in expected:
                np.testing.assert_array_equal(ranks[0][name], other[name])
        assert mismatch(expected, params_of(ranks[0])) is None
    for name in runs[0][0]:
        np.testing.assert_array_equal(runs[0][0][name], runs[1][0][name])
    if options[-len(DEFAULT_CUT) :] == DEFAULT_CUT:
        assert int(runs[0][0]["_last_piece"]) == CUT_ELEMENTS
    else:
        assert int(runs[0][0]["_pieces"]) > 2 * int(runs[0][0]["_buckets"])
