"""MPISync passes the equivalence check (:mod:`distconv.equivalence`) run as a transport's
author runs it under the transport's own launcher: each rank of a real ``mpiexec -n 2`` calls
``assert_rank_matches_local`` (``run_equivalence.py``). An MPISync that skips its broadcast at
setup fails it on rank 1, which trains from its own seed's weights, naming the parameter. With a
restart in the middle (``RESUMED_JOB``: each rank stopped mid-epoch by SIGTERM, a new MPISync
resuming from the chief's checkpoint) MPISync passes too, and one that broadcasts the parameters
but not the optimizer state, which passes the plain check, fails it."""

from __future__ import annotations

import re

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_two_ranks

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(120)]


@pytest.mark.parametrize("overlap", ["0", "1"])
def test_mpi_ranks_match_one_process(tmp_path, overlap):
    run_two_ranks("run_equivalence.py", tmp_path, overlap)
    for rank in (0, 1):
        assert (tmp_path / f"rank{rank}.txt").read_text() == "matches"


def test_mpi_without_its_broadcast_fails_on_rank_1_naming_the_parameter(tmp_path):
    run_two_ranks("run_equivalence.py", tmp_path, "0", "--no-broadcast")
    said = (tmp_path / "rank1.txt").read_text()
    assert re.match(r"rank 1 of 2: parameter '(conv|fc)\d\.(weight|bias)' is [0-9.]+ from", said)


def test_mpi_ranks_stopped_and_resumed_match_one_process(tmp_path):
    run_two_ranks("run_equivalence.py", tmp_path, "1", "--restart")
    for rank in (0, 1):
        assert (tmp_path / f"rank{rank}.txt").read_text() == "matches"
        assert (tmp_path / f"rank{rank}-restart.txt").read_text() == "matches"
    assert (tmp_path / "run" / "checkpoints").is_dir()  # rank 0 wrote there, and resumed


def test_mpi_without_the_state_s_broadcast_fails_only_after_a_restart(tmp_path):
    run_two_ranks("run_equivalence.py", tmp_path, "0", "--no-state-broadcast", "--restart")
    for rank in (0, 1):  # Adam's state starts as zeros on every rank: nothing to see
        assert (tmp_path / f"rank{rank}.txt").read_text() == "matches"
    said = (tmp_path / "rank1-restart.txt").read_text()
    named = re.match(
        r"rank 1 of 2: parameter '(conv|fc)\d\.(weight|bias)' is ([0-9.e-]+) from", said
    )
    assert named and float(named[3]) > 1e-6, said
