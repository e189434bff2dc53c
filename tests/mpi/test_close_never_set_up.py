"""A second MPI sync, never set up, closed while a refusal every rank raises alike propagates:
it has nothing to abort for."""

from __future__ import annotations

import sys

import pytest

from tests.mpi.common import NEEDS_MPIEXEC, run_mpi
from tests.other_jobs import OTHER_JOBS

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(60)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

_INIT = '    sync = dist.init("sgd", lr=0.01)\n'
_CLOSE = "        sync.close()\n"


def _with_spare(first: str) -> str:
    """:data:`OTHER_JOBS` with a second MPISync, never set up, closed in the same ``finally``
    (``first``: closed before the one whose setup is refused, or after it)."""
    spare = "        spare.close()\n"
    closes = spare + _CLOSE if first == "spare" else _CLOSE + spare
    made = _INIT + "    spare = MPISync(create_optimizer('sgd'))\n"
    imports = "from distconv.optim import create_optimizer\nfrom distconv.sync.mpi import MPISync\n"
    assert _INIT in OTHER_JOBS and _CLOSE in OTHER_JOBS  # the replaces still hold
    return imports + OTHER_JOBS.replace(_INIT, made).replace(_CLOSE, closes)


@pytest.mark.parametrize("first", ["spare", "set_up"])
def test_a_sync_never_set_up_leaves_on_a_refusal_raised_alike(tmp_path, first):
    """The set-up sync's JobMismatch (raised alike) propagates through both closes: the one
    never set up aborted the job (a traceback on every rank) where it has no collective any
    rank could wait in; each rank now says run_main's one line and exits 1."""
    script = tmp_path / "jobs.py"
    script.write_text(_with_spare(first))
    done = run_mpi(["-n", "2", sys.executable, str(script), str(tmp_path / "out")], timeout=30)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "abort" not in done.stderr, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if line.startswith("jobs.py: error: ")]
    assert len(said) == 2 and all("run different jobs" in line for line in said), said
