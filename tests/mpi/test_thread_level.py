"""The communication thread respects the thread level MPI was initialised with (real mpiexec).

mpi4py asks for ``MPI_THREAD_MULTIPLE`` unless ``mpi4py.rc.thread_level`` says otherwise; the
scripts here set it with ``python -m mpi4py -rc thread_level=...``, before MPI starts.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.mpi.common import (
    NEEDS_MPIEXEC,
    max_relative,
    params_of,
    reference,
    run_mpi,
    run_ranks,
    script,
)

pytestmark = NEEDS_MPIEXEC
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

WHY = "no communication thread; gradient buckets are reduced on the main thread"


@pytest.mark.parametrize("level", ["single", "funneled"])
def test_below_serialized_no_thread_runs_and_the_reason_is_logged_once(tmp_path, level):
    options = ("--overlap", "1", "--bucket-bytes", "300")
    ranks, proc = run_ranks(tmp_path, "adam", *options, thread_level=level)
    assert not any(bool(r["_overlap"]) for r in ranks)
    assert proc.stderr.count(WHY) == 2, proc.stderr  # once per rank, though 4 steps ran
    assert f"thread level {level!r}" in proc.stderr
    expected = reference("adam")  # reduced on the main thread, still the right answer
    for name in expected:
        np.testing.assert_array_equal(ranks[0][name], ranks[1][name])
    assert max_relative(params_of(ranks[0]), expected) <= 1e-10


def test_serialized_is_enough_for_the_thread(tmp_path):
    """The main thread calls MPI only while the thread is idle: SERIALIZED's discipline."""
    options = ("--overlap", "1", "--bucket-bytes", "300")
    ranks, proc = run_ranks(tmp_path, "adam", *options, thread_level="serialized")
    assert all(bool(r["_overlap"]) for r in ranks)
    assert WHY not in proc.stderr
    assert max_relative(params_of(ranks[0]), reference("adam")) <= 1e-10


def test_ranks_that_could_differ_on_the_thread_all_take_the_same_path(tmp_path):
    # the thread and the main-thread pump start their collectives in different orders, so a
    # job whose ranks choose differently could hang: every rank takes the path all can take
    options = [str(tmp_path), "adam", "--overlap", "1", "--bucket-bytes", "300"]
    proc = run_mpi(
        ["-n", "1", *script("run_train.py", "serialized"), *options]
        + [":", "-n", "1", *script("run_train.py", "single"), *options]
    )
    assert proc.returncode == 0, proc.stderr
    ranks = [dict(np.load(tmp_path / f"rank{r}.npz")) for r in range(2)]
    assert [bool(r["_overlap"]) for r in ranks] == [False, False]
    assert max_relative(params_of(ranks[0]), reference("adam")) <= 1e-10
