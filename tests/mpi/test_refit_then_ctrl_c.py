"""A Ctrl-C that ends a script after it set up again in the handler of ``fail_setup``'s noted
Ctrl-C (real ``mpiexec -n 2``): its ending says no note of that first one, which a setup begun
since made stale (a setup begun again settles the note, even one that is itself refused)."""

from __future__ import annotations

import sys

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi
from tests.mpi.test_fit_fails_before_setup import ABORTS, CUT_SHORT

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(60)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: both ranks set up; rank 0's next fit fails before its setup and a Ctrl-C comes as it tells
#: rank 1 (a SIGINT to itself as ``fail_setup``'s exchange begins: raised, noted, once rank 1
#: was told). Each catches what it raised and sets up again in its handler (both succeed);
#: there a later Ctrl-C ends rank 0 (under ``run_main``, each closing after its except clause)
REFIT_THEN_CTRL_C = """\
import os
import signal
import numpy as np
from distconv.distributed import run_main
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.base import tell_setup_failed
from distconv.sync.mpi import MPISync
from distconv.sync.mpi.comm import JobMismatch

sync = MPISync(create_optimizer("sgd"), timeout=40)
w = Parameter("w", np.ones(3))
sync.setup([w], {})
exchange = sync._fail_before_check


def interrupted(error):
    sync._fail_before_check = exchange
    os.kill(os.getpid(), signal.SIGINT)
    exchange(error)


sync._fail_before_check = interrupted


def fit():
    try:
        if sync.rank == 0:
            error = ValueError("no checkpoint here")
            tell_setup_failed(sync, error)
            raise error
        sync.setup([w], {})
    except (KeyboardInterrupt, JobMismatch):
        sync.setup([w], {})
        sync.barrier()
        print(f"rank {sync.rank} set up again", flush=True)
        if sync.rank == 0:
            os.kill(os.getpid(), signal.SIGINT)  # a later Ctrl-C, the first its context
            signal.pause()


def main():
    try:
        fit()
    except BaseException as exc:
        raised = exc
    else:
        raised = None
    sync.close()
    if raised is not None:
        raise raised


run_main(main)
"""


def test_a_ctrl_c_after_setting_up_again_says_no_stale_note(tmp_path):
    """The later Ctrl-C keeps the first, noted one as its context (raised in its handler):
    its ending said that note, ``this rank could not set up (ValueError: ...); the others
    were told``, as if it had cut that failure short, though the setup made again succeeded.
    The setup settles the note: the ending is ``interrupted`` alone."""
    script = tmp_path / "again.py"
    script.write_text(REFIT_THEN_CTRL_C)
    done = run_mpi(["-n", "2", sys.executable, str(script)], timeout=30)
    said = done.stdout + done.stderr
    assert "rank 0 set up again" in done.stdout, said[-3000:]
    assert "rank 1 set up again" in done.stdout, said[-3000:]
    assert "again.py: interrupted" in done.stderr, said[-3000:]
    assert CUT_SHORT not in said and "could not set up" not in said, said[-3000:]
    assert not any(abort in said for abort in ABORTS), said[-3000:]
    assert done.returncode == 130, said[-3000:]  # rank 0's; rank 1 ends cleanly
