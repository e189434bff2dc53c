"""A launch whose ``--out`` another live job's run holds: its rank 0 was refused the directory
as in use, and the launcher restarted that refusal, starting the shards and workers again each
time; with ``--overwrite``, the first restart after the other run ended deleted it, and the
launch said ``finished after 3 restart(s)``. Now a ``distconv train`` launch is refused before
anything starts, and a program's refusal from another job's holder ends the job unrestarted
(``launcher.out_holder``). The other run is left whole."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from distconv.run_files import LOCK
from tests.child_env import child_path
from tests.launcher.launch_cli import launch
from tests.launcher.real_children import mpiexec_or_skip
from tests.other_jobs import SMALL_NET
from tests.processes import job_env
from tests.test_cli import SMALL

#: the epochs of the other job's run: long enough that the launch's restarts (each a second or
#: two) would outlast it, as they did when it was deleted
EPOCHS = 40
#: steps in one epoch of it (``--data synthetic``'s 384 examples, ``--batch-size 32``)
STEPS = 12

#: ``python FIT OUT``: one rank fits a small net into ``OUT`` (its own out_dir: the launch
#: cannot see it, so its rank meets the lock)
FIT = (
    """\
import sys
import numpy as np
import distconv.distributed as dist
from distconv import Trainer
from distconv.layers import FullyConnected, MSELoss
from distconv.network import Network


def main():
    sync = dist.init("sgd", lr=0.01)
    try:
"""
    + SMALL_NET
    + """        Trainer(net, sync, 2, out_dir=sys.argv[1], progress=False).fit(data, epochs=1)
    finally:
        sync.close()


dist.run_main(main)
"""
)


@contextmanager
def other_run(cwd: Path, out: str) -> Iterator[subprocess.Popen]:
    """A live ``distconv train`` of :data:`EPOCHS` epochs into ``cwd/out``, once it holds the
    directory's lock; killed with its job after the block where it has not ended."""
    argv = [sys.executable, "-m", "distconv", "train", *SMALL, "--epochs", str(EPOCHS)]
    with job_env({**os.environ, "PYTHONPATH": child_path()}) as env:
        proc = subprocess.Popen(
            [*argv, "--out", out], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        holder, lock = f"pid {proc.pid} on {socket.gethostname()}", cwd / out / LOCK
        while not (lock.exists() and lock.read_text().strip() == holder):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else proc.returncode
        yield proc


def _its_run_is_whole(proc: subprocess.Popen, out: Path) -> None:
    """``proc``, the other run, ends well, and ``out`` holds its every epoch and checkpoint."""
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert len((out / "metrics.jsonl").read_text().splitlines()) == EPOCHS
    steps = sorted(p.name for p in (out / "checkpoints").glob("step-*.json"))
    assert steps[-1] == f"step-{EPOCHS * STEPS:08d}.json", steps  # its last epoch's


@pytest.mark.timeout(180)
def test_a_launch_into_another_live_run_s_out_is_refused_before_it_starts(tmp_path):
    with other_run(tmp_path, "x") as proc:
        done = launch(
            "local", "--workers", "1", "--servers", "0", "--max-restarts", "3", "--",
            *SMALL, "--epochs", "1", "--out", "x", "--overwrite", cwd=tmp_path, timeout=120,
        )  # fmt: skip
        said = done.stdout + done.stderr
        assert done.returncode == 1, said
        in_use = f"error: --out after --: x is in use by pid {proc.pid} on {socket.gethostname()}"
        assert in_use in said and "choose another --out" in said, said
        assert "restarting" not in said and "[worker 0]" not in said, said  # nothing started
        assert not (tmp_path / "runs").exists()  # no run directory made
        _its_run_is_whole(proc, tmp_path / "x")


#: the launches of :data:`FIT`: one worker of a local launch, two MPI ranks
LAUNCHES = [
    pytest.param(("local", "--workers", "1", "--servers", "0"), id="local"),
    pytest.param(("mpi", "-np", "2"), id="mpi", marks=pytest.mark.mpi),
]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("how", LAUNCHES)
def test_a_program_refused_another_job_s_out_is_not_restarted(tmp_path, how):
    """A program's own output directory, which the launch cannot see before it starts: its
    rank's refusal ends the job (the holder is no process of this launch), unrestarted."""
    if how[0] == "mpi":
        mpiexec_or_skip()
    script = tmp_path / "fit.py"
    script.write_text(FIT)
    with other_run(tmp_path, "x") as proc:
        done = launch(
            *how, "--max-restarts", "3", "--run-dir", "run", "--", str(script), "x",
            cwd=tmp_path, timeout=120,
        )  # fmt: skip
        said = done.stdout + done.stderr
        assert done.returncode == 1, said
        assert "restarting the job" not in said, said
        holder = f"pid {proc.pid} on {socket.gethostname()}"
        cause = f"in use by {holder}, no process of this launch: another job's run is going there"
        assert cause in said, said
        why = "not restarting (--max-restarts 3): the output directory is in use by another job's"
        assert why in said, said
        _its_run_is_whole(proc, tmp_path / "x")
