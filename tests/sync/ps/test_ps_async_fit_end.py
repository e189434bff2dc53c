"""After ``Trainer.fit`` returns, every worker holds the model the shards trained, and a second
``fit`` starts from it.

In async mode a worker's copy of a parameter is the value of its last reply: other workers
pushed after it, so each rank but the one that pushed last lags the shards when ``fit`` returns
(the model a user evaluates or saves after it is not the trained one), and a second ``fit``
seeded the shards from rank 0's lagging copy, throwing the last updates away. Sync mode ends
every step with every rank holding the shards' values; it is checked to stay so. The shards'
values are read with a pull of our own, on a socket of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ps_helpers import shard_values, small_net

from tests.child_env import child_path

WORKER = Path(__file__).with_name("fit_worker.py")


def fit_worker(endpoints: list[str], rank: int, out: Path, *args: str) -> subprocess.Popen:
    """``fit_worker.py`` as rank ``rank`` of 2 (``args``: its ``SLOW_SECONDS [stop]``), its
    stdin, stdout and stderr piped."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{child_path()}{os.pathsep}{WORKER.parent}",
        "OMP_NUM_THREADS": "1",
    }
    cmd = [sys.executable, str(WORKER), ",".join(endpoints), str(rank), "2", str(out), *args]
    return subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )  # fmt: skip


def start_workers(endpoints: list[str], out: Path, stop: bool = False) -> list[subprocess.Popen]:
    """Ranks 0 and 1 of ``fit_worker.py``; rank 1 is slow, so rank 0's last push is not last;
    ``stop``: rank 0 is sent SIGTERM after its first step, and the first fit stops."""
    stops = ["stop"] if stop else []
    return [fit_worker(endpoints, r, out, slow, *stops) for r, slow in ((0, "0"), (1, "0.02"))]


def wait_for(procs: list[subprocess.Popen], word: str) -> None:
    for rank, proc in enumerate(procs):
        line = proc.stdout.readline().strip()
        if line == "ready":
            line = proc.stdout.readline().strip()
        if line != word:
            proc.kill()
            raise AssertionError(f"rank {rank} said {line!r}, not {word!r}: {proc.stderr.read()}")


def go_on(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray], who: str) -> None:
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-12, err_msg=who)


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("mode", "stop"),
    [("sync", False), ("async", False), ("sync", True), ("async", True)],
    ids=["sync", "async", "sync-stopped", "async-stopped"],
)
def test_after_fit_every_worker_holds_the_shards_values_and_a_second_fit_starts_from_them(
    shards, tmp_path, mode, stop
):
    """``stop``: the first fit ends in ``Preempted`` (SIGTERM, no ``out_dir``: no checkpoint);
    a script that catches it keeps that model, or fits again."""
    staleness = ["--max-staleness", "100"] * (mode == "async")  # a sync shard takes none
    endpoints = shards.start(2, workers=2, mode=mode, extra=staleness)
    procs = start_workers(endpoints, tmp_path, stop)
    try:
        wait_for(procs, "fit1")
        for rank in range(2):  # else the epoch's end, not the stop, made the model current
            path = tmp_path / f"stopped-{rank}.txt"
            said = path.read_text() if path.exists() else None
            # rank 0 got the SIGTERM; rank 1 stopped with it, and says whose it was
            words = (
                "stopped by SIGTERM after step 8"
                if rank == 0
                else "stopped after step 8: rank 0 got SIGTERM"
            )
            assert said == (words if stop else None), f"rank {rank}"
        trained = shard_values(endpoints)
        first = small_net(seed=0).parameters()
        assert not np.allclose(trained[first[0].name], first[0].value)  # it trained
        for rank in range(2):
            with np.load(tmp_path / f"fit1-{rank}.npz") as held:
                assert_same(dict(held), trained, f"rank {rank} after fit")
        go_on(procs)
        wait_for(procs, "fit2")
        assert_same(shard_values(endpoints), trained, "the shards after a second fit's setup")
        go_on(procs)
        for proc in procs:
            assert proc.wait(60) == 0, proc.stderr.read()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                stream.close()
