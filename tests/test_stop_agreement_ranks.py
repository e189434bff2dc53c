"""Which rank got the stop signal, as every rank of a real ``mpiexec`` job says it: the rank
that got it says ``stopped by SIGTERM``, the others ``stopped after step N: rank R got
SIGTERM`` (or how many ranks got it), so an operator, and the launcher, look at the right
node. One small sum carries it (:func:`distconv.stop_agreement.stop_agreed`)."""

from __future__ import annotations

import json

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(120)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


#: what each rank says (a stop signalled after step 3 is agreed at the check of step 8)
ONE = "stopped after step 8: rank 1 got SIGTERM"
OWN = "stopped by SIGTERM after step 8"


@pytest.mark.parametrize(
    "ranks, plan, said",
    [
        (2, "1:SIGTERM", [ONE, OWN]),
        (
            2,
            "0:SIGINT",
            ["stopped by SIGINT after step 8", "stopped after step 8: rank 0 got SIGINT"],
        ),
        (2, "0:SIGINT,1:SIGTERM", [ONE, OWN]),  # SIGTERM wins: rank 0's Ctrl-C is not named
        (2, "0:SIGTERM,1:SIGTERM", [OWN, OWN]),
        (3, "1:SIGTERM,2:SIGTERM", ["stopped after step 8: 2 ranks got SIGTERM", OWN, OWN]),
    ],
)
def test_each_rank_says_whether_the_stop_signal_was_its_own_or_whose(tmp_path, ranks, plan, said):
    status = 143 if "SIGTERM" in plan else 130
    proc = run_mpi(["-n", str(ranks), *script("run_stop_signals.py"), str(tmp_path), plan], 90)
    assert proc.returncode == status, proc.stderr[-3000:]
    for rank, words in enumerate(said):
        got = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert got == {"message": words, "status": status, "step": 8}, f"rank {rank}"
