"""``distconv.distributed.run_main`` on a real ``mpiexec -n 2`` job, in a script started as
``mpiexec -n 2 python script.py`` (no ``-m mpi4py``: MPISync's exception hook aborts the job)."""

from __future__ import annotations

import sys

import pytest

from distconv.rank_endings import different_jobs_in
from tests.mpi.common import NEEDS_MPIEXEC, run_mpi
from tests.other_jobs import OTHER_JOBS

pytestmark = [*NEEDS_MPIEXEC, pytest.mark.timeout(120)]
pytest.importorskip("mpi4py", reason="mpi4py is not installed")

#: rank 1 meets a setting error after its MPI sync is built, rank 0 goes on to train
LATE_ERROR = """\
import sys
import numpy as np
import distconv.distributed as dist
from distconv import Trainer
from distconv.layers import FullyConnected, MSELoss
from distconv.network import Network
from distconv.runtime import RuntimeConfigError


def main():
    sync = dist.init("sgd", lr=0.01)
    if sync.rank == 1:
        raise RuntimeConfigError("a setting refused on rank 1")
    net = Network()
    net.add("out", FullyConnected(4, 1), "x")
    net.add("loss", MSELoss(), ["out", "target"])
    rng = np.random.default_rng(0)
    data = {"x": rng.standard_normal((64, 4)), "target": rng.standard_normal((64, 1))}
    Trainer(net, sync, 2, out_dir=sys.argv[1], progress=False).fit(data, epochs=1)
    sync.close()


dist.run_main(main)
"""


#: rank 1 meets a setting error before it initialised MPI (here, before init()); rank 0 trains
EARLY_ERROR = (
    LATE_ERROR.replace(
        '    sync = dist.init("sgd", lr=0.01)\n    if sync.rank == 1:\n',
        '    if os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK")) == "1":\n',
    )
    .replace("import sys\n", "import os\nimport sys\n", 1)
    .replace("    net = Network()\n", '    sync = dist.init("sgd", lr=0.01)\n    net = Network()\n')
)


@pytest.mark.parametrize("debug", ["", "1"])
def test_a_setting_error_before_mpi_is_initialised_aborts_the_job(tmp_path, monkeypatch, debug):
    """A rank that ends before MPI_Init (run_main's one line and exit 1, or the traceback
    under DISTCONV_DEBUG=1) left rank 0 waiting in MPI_Init for ever under Hydra:
    it initialises MPI to abort the job, as distconv train does."""
    monkeypatch.setenv("DISTCONV_DEBUG", debug)
    script = tmp_path / "early.py"
    script.write_text(EARLY_ERROR)
    done = run_mpi(["-n", "2", sys.executable, str(script), str(tmp_path / "out")], timeout=60)
    assert done.returncode != 0, done.stderr[-3000:]
    assert "a setting refused on rank 1" in done.stderr, done.stderr[-3000:]
    assert ("Traceback" in done.stderr) == bool(debug), done.stderr[-3000:]


def test_a_setting_error_after_the_mpi_sync_is_built_still_aborts_the_job(tmp_path):
    """run_main's one line for a RuntimeConfigError (exit 1 by SystemExit) skipped the MPI
    sync's exception hook, which aborts the job: rank 0 waited in setup for ever.
    The error goes to the hook, which says it and ends every rank."""
    script = tmp_path / "late.py"
    script.write_text(LATE_ERROR)
    done = run_mpi(["-n", "2", sys.executable, str(script), str(tmp_path / "out")], timeout=60)
    assert done.returncode != 0, done.stderr[-3000:]
    assert "a setting refused on rank 1" in done.stderr, done.stderr[-3000:]


#: :data:`OTHER_JOBS` whose ``main`` never closes its sync: its abort hook still installed
UNCLOSED_JOBS = OTHER_JOBS.replace(
    "    finally:\n        sync.close()\n", "    finally:\n        pass\n"
)


@pytest.mark.parametrize(
    "runner, text",
    [([], OTHER_JOBS), (["-m", "mpi4py"], OTHER_JOBS), ([], UNCLOSED_JOBS)],
    ids=["python", "mpi4py", "python-unclosed"],
)
def test_ranks_that_run_different_jobs_each_say_one_line(tmp_path, runner, text):
    """A JobMismatch ended each rank of a script run through run_main with a traceback, where
    ``distconv train`` says one line. Every rank raises it alike, so each says its line
    and exits 1, none left waiting (mpi4py's runner aborts then, which ends the job as well);
    so under the MPI sync's abort hook too, where ``main`` does not close the sync."""
    assert text is OTHER_JOBS or "sync.close()" not in text  # the replace still holds
    script = tmp_path / "jobs.py"
    script.write_text(text)
    command = [sys.executable, *runner, str(script), str(tmp_path / "out")]
    done = run_mpi(["-n", "2", *command], timeout=30)
    assert done.returncode != 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if line.startswith("jobs.py: ")]
    assert sorted(said) == [
        f"jobs.py: error: rank {r} and rank {1 - r} run different jobs: "
        f"config.batch_size: {2 + r} here, {3 - r} there"
        for r in (0, 1)
    ], done.stderr[-3000:]
    # the launcher reads each rank's line back as the job's cause, blaming no rank
    for line in said:
        assert different_jobs_in([line]) == line.partition(": error: ")[2], line


def _stopping_alone(script: str, stop: str) -> str:
    """``script`` (:data:`LATE_ERROR`, :data:`EARLY_ERROR`) with rank 1's error ``stop``."""
    return script.replace('RuntimeConfigError("a setting refused on rank 1")', stop).replace(
        "from distconv.runtime import RuntimeConfigError", "from distconv.sync import JobRefused"
    )


#: :data:`LATE_ERROR`'s refusal on rank 1 alone under a hook the script sets after ``init()``
#: that does not hand on to MPISync's: a logger's calling Python's own (it logs to
#: ``<out>.log``), Python's own put back
_REFUSED = _stopping_alone(LATE_ERROR, 'JobRefused("rank 1 refuses this job alone")')
_INIT = '    sync = dist.init("sgd", lr=0.01)\n'
_OWN_HOOK = (
    "    def logged(*exc):\n"
    "        with open(sys.argv[1] + '.log', 'a') as log:\n"
    "            log.write(f'LOGGED {exc[1]!r}\\n')\n"
    "        sys.__excepthook__(*exc)\n"
    "\n"
    "    sys.excepthook = logged\n"
)

#: rank 1 stops alone, rank 0 goes on into setup's collectives (or MPI_Init): a refusal of
#: the job no other rank raises (a strategy's or the script's own JobRefused), a Ctrl-C
ALONE = {
    "refused": _REFUSED,
    "refused-under-a-loggers-hook": _REFUSED.replace(_INIT, _INIT + _OWN_HOOK),
    "refused-under-pythons-hook": _REFUSED.replace(
        _INIT, _INIT + "    sys.excepthook = sys.__excepthook__\n"
    ),
    "interrupted": _stopping_alone(LATE_ERROR, "KeyboardInterrupt('rank 1 interrupted')"),
    "interrupted-before-init": _stopping_alone(
        EARLY_ERROR, "KeyboardInterrupt('rank 1 interrupted')"
    ),
}


@pytest.mark.parametrize("stop", ALONE)
def test_a_rank_that_stops_alone_still_ends_the_job(tmp_path, stop):
    """run_main's one line for a JobRefused or a Ctrl-C (exit 1 or 130 by SystemExit) skipped
    the MPI sync's exception hook whatever raised it, though only MPI's own refusals
    (JobMismatch, WireRefused) are raised alike on every rank: one raised on rank 1 alone
    left rank 0 waiting in setup's collectives until the watchdog's 600 s, and a Ctrl-C before
    MPI_Init left it in MPI_Init for ever. Such a stop goes to the hook, which
    says it and aborts the job, or, before MPI_Init, aborts it as a setting error does; so
    under a hook the script set after init() that does not hand on to it, which left rank 0
    waiting as well: run_main hands it to the script's hook, which it had skipped
    (a logger's log stayed empty), then aborts the job through the open one."""
    assert ALONE[stop].count("sys.excepthook") == ("under" in stop)  # the replace still holds
    script = tmp_path / "alone.py"
    script.write_text(ALONE[stop])
    done = run_mpi(["-n", "2", sys.executable, str(script), str(tmp_path / "out")], timeout=30)
    assert done.returncode != 0, done.stderr[-3000:]
    said = "rank 1 refuses this job alone" if stop.startswith("refused") else "interrupted"
    assert said in done.stderr, done.stderr[-3000:]
    assert done.stderr.count("Traceback (most recent call last)") <= 1, done.stderr[-3000:]
    log = tmp_path / "out.log"
    logged = log.read_text() if log.exists() else None
    assert logged == (
        "LOGGED JobRefused('rank 1 refuses this job alone')\n" if "logger" in stop else None
    )
