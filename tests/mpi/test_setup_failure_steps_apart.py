"""A fit that fails before its setup on one rank, where the ranks counted different steps
(real ``mpiexec -n 2``): setup's check refuses them in its steps' exchange, before the
descriptions that carry the error are compared, so the other rank never sees the error."""

from __future__ import annotations

import sys
import time

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi
from tests.mpi.test_fit_fails_before_setup import ABORTS, refused_note

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(60)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: both ranks set up and start a step; rank 1 abandons it, rank 0 finishes it (its
#: ``finish_step`` fails, but counts the step), then abandons it too. Rank 0's next fit fails
#: before its setup (a ValueError, told with ``tell_setup_failed`` as ``Trainer.fit`` does)
#: while rank 1 sets up again; with ``ctrlc``, a Ctrl-C comes as rank 0's exchange begins (a
#: SIGINT to itself: held to the exchange's end). Each says what it raised, then its first
#: step's refusal after that setup, then closes
STEPS_APART = """\
import os
import signal
import sys
import numpy as np
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import SyncError, tell_setup_failed
from distconv.sync.mpi import MPISync

sync = MPISync(create_optimizer("sgd", lr=0.5), bucket_bytes=24, overlap=False, timeout=40)
params = [Parameter(n, np.arange(3.0) + i) for i, n in enumerate("ab")]
rank = sync.rank
sync.setup(params, {})
sync.start_step(1)
params[1].grad += 1.0
params[1].inc_update(sync)
if rank == 0:
    params[0].grad += 1.0
    params[0].inc_update(sync)
    try:
        sync.finish_step()
    except SyncError:
        pass
sync.abandon_step()
for p in params:
    p.zero_grad()
if "ctrlc" in sys.argv:
    exchange = sync._fail_before_check

    def interrupted(error):
        os.kill(os.getpid(), signal.SIGINT)
        exchange(error)

    sync._fail_before_check = interrupted
try:
    if rank == 0:
        error = ValueError("no checkpoint here")
        tell_setup_failed(sync, error)
        raise error
    sync.setup(params, {})
except BaseException as raised:
    said = [f"{type(raised).__name__}: {raised}", *getattr(raised, "__notes__", [])]
    print(f"rank {rank} raised " + " | ".join(said), flush=True)
try:
    sync.start_step(1)
except SyncError as refused:
    print(f"rank {rank} step refused: {refused}", flush=True)
sync.close()
print(f"rank {rank} closed", flush=True)
"""
#: what setup's check refused on both ranks, in its steps' exchange
APART = (
    "ranks are at different points of the job (rank 0: comparing the job (setup's check) "
    "after 1 step, rank 1: comparing the job (setup's check) after 0 steps (1 abandoned)); "
    "rank 1 abandoned 1 step that rank 0 counted"
)


@pytest.mark.parametrize("calm", [False, True], ids=["ctrl-c", "no-ctrl-c"])
def test_a_failure_refused_as_steps_apart_says_the_others_were_only_refused(tmp_path, calm):
    """The job check's refusal as ranks that counted different steps is a JobMismatch, as the
    told error's, but raised before the descriptions were compared: rank 1 raises it, never
    hearing of rank 0's error. Rank 0's error said ``telling the other ranks`` all the same,
    its Ctrl-C ``the others were told``, and its next step ``told to the others``, and the
    refusal, which says the job cannot go on, was said nowhere on rank 0. Each now says that
    the others were only refused in their check, and the refusal; both ranks still leave the
    job cleanly (every collective made on both)."""
    script = tmp_path / "apart.py"
    script.write_text(STEPS_APART)
    began = time.monotonic()
    done = run_mpi(["-n", "2", sys.executable, str(script), *([] if calm else ["ctrlc"])], 30)
    took = time.monotonic() - began
    said = done.stdout + done.stderr
    refused = f"the others were not told, only refused in their check: {APART}"
    assert f"rank 0 raised {refused_note(calm, refused)}" in done.stdout, said[-3000:]
    assert f"rank 1 raised JobMismatch: {APART}" in done.stdout, said[-3000:]
    # rank 0's own two lines alone name its error: rank 1 never saw it
    assert done.stdout.count("no checkpoint here") == 2, said[-3000:]
    assert "telling the other ranks" not in said, said[-3000:]
    assert "were told" not in said and "told to the others" not in said, said[-3000:]
    step = "rank 0 step refused: start_step after a setup that failed on this rank before its "
    step += f"job check (ValueError: no checkpoint here), {refused}"
    assert step in done.stdout, said[-3000:]
    assert "rank 0 closed" in done.stdout and "rank 1 closed" in done.stdout, said[-3000:]
    assert not any(abort in said for abort in ABORTS), said[-3000:]
    assert done.returncode == 0, said[-3000:]
    assert took < 20, f"took {took:.1f} s"
