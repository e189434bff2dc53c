"""A rank whose description at an ``all_equal`` meeting cannot be sent (JSON cannot write it)
tells the other ranks before it raises, and its error carries a note that says so. The note
read ``all_equal made its exchange all the same, telling the other ranks``, words of the sync's
own steps; it now says what it means for the user: the other ranks stop too, naming this one.
Real ``mpiexec -n 2``."""

from __future__ import annotations

import sys

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(60)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: both ranks set up; at the meeting that follows, rank 1's description holds itself. Each
#: rank prints what it raised and that error's notes, then closes
MEETING = """\
import numpy as np
from distconv.notes import notes_of
from distconv.optim import create_optimizer
from distconv.parameter import Parameter
from distconv.sync.mpi import MPISync

sync = MPISync(create_optimizer("sgd"), timeout=40)
looped = []
looped.append(looped)
try:
    sync.setup([Parameter("w", np.ones(3))], {})
    try:
        sync.all_equal({"data": looped} if sync.rank == 1 else {"data": 1})
    except Exception as error:
        print(f"rank {sync.rank} raised {type(error).__name__} notes {notes_of(error)}", flush=True)
finally:
    sync.close()
"""


def test_a_meetings_unsendable_description_says_the_others_stop_too(tmp_path):
    script = tmp_path / "meeting.py"
    script.write_text(MEETING)
    done = run_mpi(["-n", "2", sys.executable, str(script)], timeout=30)
    said = done.stdout + done.stderr
    note = (
        "the other ranks were told of this error and stop too, naming rank 1 (a rank that "
        "failed as well names its own error)"
    )
    assert f"rank 1 raised ValueError notes [{note!r}]" in done.stdout, said[-3000:]
    assert "rank 0 raised JobMismatch" in done.stdout, said[-3000:]
