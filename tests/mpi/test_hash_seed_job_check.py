"""The job check over a real ``mpiexec -n 2`` whose ranks hash strings with other seeds (as
mpiexec's ranks do, each with its own random ``PYTHONHASHSEED``): a config alike on both is
accepted, a real difference still refused and named (``run_hash_seed_job_check.py``)."""

from __future__ import annotations

import json

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi, script

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(60)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")


def test_ranks_with_other_hash_seeds_agree_on_a_set_and_still_name_a_difference(tmp_path):
    """A set was written in hash order and an object with its address (``default=str``), so
    ranks that agree were refused at setup: ``config.frozen: ['fc', 'conv1', 'conv2'] here,
    ['conv1', 'conv2', 'fc'] there``."""
    runner = [*script("run_hash_seed_job_check.py"), str(tmp_path)]
    seeded = [["env", f"PYTHONHASHSEED={s}", *runner] for s in (1, 2)]
    proc = run_mpi(["-n", "1", *seeded[0], ":", "-n", "1", *seeded[1]], timeout=40)
    assert proc.returncode == 0, proc.stderr
    said = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert said[0]["order"] != said[1]["order"], "the two seeds order the set alike: no test"
    assert [(s["set"], s["object"], s["keys"], s["dataclass"]) for s in said] == [
        ("ok", "ok", "ok", "ok")
    ] * 2
    # rank 0's pair raised before the exchange, rank 1 waiting in it
    assert [s["one_rank_pair"] for s in said] == [
        f"JobMismatch: rank {r} and rank {1 - r} run different jobs: config.k.1 (builtins.int): "
        f"{(0, repr('<missing>'))[r]} here, {(repr('<missing>'), 0)[r]} there"
        for r in (0, 1)
    ]
    for rank, other, ours, theirs in ((0, 1, 8, 16), (1, 0, 16, 8)):
        assert said[rank]["differ"] == (
            f"JobMismatch: rank {rank} and rank {other} run different jobs: "
            f"config.batch_size: {ours} here, {theirs} there"
        )
