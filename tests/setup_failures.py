"""A script whose rank 0 alone fails in ``Trainer.fit`` before its sync's setup, run through
``distconv.distributed.run_main``: the MPI and the parameter-server tests of what the other
ranks hear (``tests/mpi/test_fit_fails_before_setup.py``,
``tests/sync/ps/test_ps_fit_fails_before_setup.py``)."""

from __future__ import annotations

from distconv.rank_endings import setup_failure_text
from distconv.sync.errors import JobRefused
from distconv.sync.ps.channel import shard_error
from distconv.sync.ps.job_hello import REFUSED_JOB
from tests.other_jobs import SMALL_NET

#: ``python FAILS_BEFORE_SETUP OUT_DIR [linger|outlive|hang]``: every rank fits a small net with
#: ``resume=True`` and ``out_dir=OUT_DIR``, a directory that does not exist, which the chief alone
#: opens: its ``CheckpointError`` comes before the sync's setup, the other ranks' fit goes on
#: into it. Every rank closes its sync in a ``finally``; with ``linger``, rank 0 does not, but
#: waits (up to 30 s) for ``OUT_DIR.done``, which every other rank writes (its pid) as its fit
#: ends: it never closes while they wait. With ``outlive``, rank 0 waits (up to 30 s) for the
#: process that wrote it to end (an earlier attempt's ``OUT_DIR.done`` removed first), then
#: closes: the told rank exits first. With ``hang``, rank 0 sleeps 30 s after its failure and
#: only then closes: it outlives the launcher's settle time. With ``late SECONDS``, rank 0 ignores
#: SIGTERM and waits as with ``outlive``, then SECONDS more (past the settle time, through the
#: launcher's stop), then closes and exits 1 on its own
FAILS_BEFORE_SETUP = (
    """\
import os
import signal
import sys
import time
from pathlib import Path
import numpy as np
import distconv.distributed as dist
from distconv import Trainer
from distconv.layers import FullyConnected, MSELoss
from distconv.network import Network

out = Path(sys.argv[1])
done = out.with_name(out.name + ".done")
linger = sys.argv[2:] == ["linger"]
late = sys.argv[2:3] == ["late"]
outlive = sys.argv[2:] == ["outlive"] or late
hang = sys.argv[2:] == ["hang"]


def gone(pid):  # ended: a zombie its parent holds too
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def main():
    sync = dist.init("sgd", lr=0.01)
    try:
"""
    + SMALL_NET
    + """        trainer = Trainer(net, sync, 2, out_dir=out, progress=False)
        if outlive and sync.rank == 0:  # an earlier attempt's: rank 1 writes it once told
            done.unlink(missing_ok=True)
        try:
            trainer.fit(data, epochs=1, resume=True)
        finally:
            if sync.rank != 0:  # whole or not at all: rank 0 reads it
                done.with_name(f"{done.name}.{sync.rank}").write_text(str(os.getpid()))
                done.with_name(f"{done.name}.{sync.rank}").replace(done)
    finally:
        if late and sync.rank == 0:  # the launcher's stop: it exits when it will
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if hang and sync.rank == 0:
            time.sleep(30)
        if (linger or outlive) and sync.rank == 0:
            deadline = time.monotonic() + 30
            while not done.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            while outlive and not gone(int(done.read_text())) and time.monotonic() < deadline:
                time.sleep(0.01)
        if late and sync.rank == 0:
            time.sleep(float(sys.argv[3]))
        if not linger or sync.rank != 0:
            sync.close()


dist.run_main(main)
"""
)

#: what rank 0's fit raises: ``CheckpointError: <this> <OUT_DIR>/checkpoints: ...``
NO_CHECKPOINT = "--resume: no complete checkpoint in"
#: what every other rank's setup names, leading: rank 0's failure, before its job check
FAILED_ON_RANK_0 = f"setup failed on rank 0 before its job check: CheckpointError: {NO_CHECKPOINT}"
#: what another rank's job check says of it, where it made the check itself (MPI's)
TOLD_OF_RANK_0 = f"rank 0 could not set up: CheckpointError: {NO_CHECKPOINT}"


def told_by_a_shard(rank: int, failed: int, error: str = "CheckpointError: none") -> JobRefused:
    """The ``JobRefused`` rank ``rank``'s worker raises where shard 0 answers its job check
    with rank ``failed``'s failure note (``error``), made as its channel makes it
    (:func:`~distconv.sync.ps.channel.shard_error`): marked as telling of that failure."""
    said = setup_failure_text(failed, error)
    made = shard_error(
        f"rank {rank}, all_equal 1: pserver 127.0.0.1:5: {said}", REFUSED_JOB["refused"]
    )
    assert isinstance(made, JobRefused)
    return made
