"""A failed job whose mpiexec printed more lines after its report than the launcher's tail of
it keeps (:data:`launcher.mpi_exit.READ_LINES`), then stayed and was stopped: the failure report
still reads what came before the report (a rank's reason), not only the statuses after it."""

from __future__ import annotations

import json
import sys

import pytest

import launcher.child
from launcher.child_spec import ChildSpec
from launcher.mpi_exit import READ_LINES, mpiexec_reader
from launcher.supervisor import Supervisor

#: an mpiexec whose rank 1 says why it ends the job, then ``{before}`` lines, then Hydra's
#: report of both ranks (rank 1 exited 3: wait status 768), then ``{after}`` lines, then it
#: stays (15 s)
MPIEXEC = (
    "import time\n"
    "print('[1] rank 1: SyncError: step 3 differs; aborting the MPI job')\n"
    "for _ in range({before}):\n    print('error: rank 0 waits')\n"
    "print('[mpiexec@vm] Exit codes: [vm] 0,768')\n"
    "for _ in range({after}):\n    print('error: stuck')\n"
    "print('', end='', flush=True)\ntime.sleep(15)\n"
)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("before", "after"),
    [(0, READ_LINES + 100), (READ_LINES // 2, READ_LINES // 2 + 100)],
    ids=["report-left", "reason-left"],
)
def test_a_ranks_reason_before_a_report_pushed_out_of_the_tail_is_the_cause(
    tmp_path, monkeypatch, before, after
):
    """The rank's reason line came before Hydra's report, and left the tail with it: the
    report kept the rank's status (the lines from the report on are kept) but lost its
    reason, ``rank 1 ended the job: SyncError: step 3 differs``. The same where the lines
    after the report pushed out the reason alone, the report still in the tail: the lines
    before the report were put back only where the report itself had left."""
    monkeypatch.setattr(launcher.child, "WRAPUP_SECONDS", 1.0)
    command = [sys.executable, "-c", MPIEXEC.format(before=before, after=after)]
    spec = ChildSpec("mpiexec", 0, command, reader=mpiexec_reader(2))
    with (tmp_path / "out").open("wb") as out:
        status = Supervisor(tmp_path / "run", grace=2, out=out, err=out).run(lambda _r: [spec])
    said = (tmp_path / "out").read_text()
    assert "mpiexec 0 did not exit 1 s after it reported the job's end" in said, said[-2000:]
    assert status == 3, said[-2000:]
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert report["cause"] == (
        "rank 1 ended the job: SyncError: step 3 differs; a rank exited with code 3; "
        "mpiexec itself died of signal SIGTERM"
    ), report
