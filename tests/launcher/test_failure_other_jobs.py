"""The failure report reads that the ranks run different jobs from a rank's own line, as each
launch path writes it, and from nothing else: under ``--log-format json`` the cause was
the words up to the line's end, the JSON object's other fields with them
(``...8 there","logger":"distconv",...}``); a rank's reason behind ``rank 1 ended the job:
JobMismatch:`` was not taken for a mismatch (the headline blamed mpiexec's first rank to exit);
and the words quoted inside another failure (a bye's error, a user's message) were.

One real ``distconv-launch mpi`` of ``distconv train`` ranks (the lines as Hydra tags them);
the other lines, each as a launch path writes it (seen in real runs), on :class:`Failure`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from distconv.sync.ps.stuck import different_jobs
from launcher.failure import Failure
from tests.launcher.launch_cli import ENV
from tests.launcher.real_children import mpiexec_or_skip
from tests.processes import run_job

OTHER_JOB = Path(__file__).with_name("ps_train_other_job.py")
SAID = "rank 1 and rank 0 run different jobs: config.batch_size: 16 here, 8 there"
HEADLINE = "the ranks run different jobs, which stops every rank (worker 1 exited first, "


def _failure(*tail: str, cause: str | None = None) -> Failure:
    return Failure("worker", 1, 1, None, "l", list(tail), 0, cause=cause)


def _json(message: str, level: str = "error") -> str:
    entry = {"time": "t", "level": level, "message": message, "logger": "distconv", "rank": 1}
    return json.dumps(entry, separators=(",", ":"))


@pytest.mark.parametrize(
    "line",
    [
        f"distconv train: error: {SAID}",  # MPI's ranks under run_main
        f"[1] distconv train: error: {SAID}",  # behind Hydra's tag
        f"[1,1]<stderr>: script.py: error: {SAID}",  # Open MPI's, a script's run_main
        f"distconv train: error: rank 1, hello: pserver 127.0.0.1:5555: {SAID}",  # a shard's
        f"distconv train: error: rank 1, step 3: pserver 127.0.0.1:5555: {SAID}",  # a push's
        f"distconv train: error: rank 0, checkpoint 4: pserver [::1]:5: {SAID}",
        f"distconv.sync.errors.JobRefused: rank 1, all_equal:1: pserver [::1]:5: {SAID}",
        f"[1] rank 1: JobMismatch: {SAID}; aborting the MPI job",  # a rank's reason
        _json(f"distconv train: error: {SAID}"),  # --log-format json
        "[1] " + _json(f"distconv train: error: {SAID}"),
    ],
)
def test_a_ranks_own_line_is_the_cause(line):
    failure = _failure("some output", line)
    assert failure.cause == SAID
    assert failure.describe() == f"{HEADLINE}with exit code 1): {SAID}"


@pytest.mark.parametrize(
    "line",
    [
        "distconv train: error: rank 1, push: pserver x: rank 2 (host h, last step 3) closed "
        f'on "JobRefused: {SAID}"; rank 1 (step 4) waits for its push',
        f"ValueError: could not read '{SAID}'",
        _json(f"distconv train: error: {SAID}", level="info"),  # a log line, no error
    ],
)
def test_a_quote_of_the_words_in_another_failure_is_no_cause(line):
    failure = _failure(line)
    assert failure.cause is None
    assert failure.describe() == "worker 1 failed with exit code 1"


def test_a_reason_read_by_mpiexecs_reader_names_the_mismatch():
    """mpiexec's reader gives ``rank 1 ended the job: JobMismatch: ...`` as the cause."""
    cause = f"rank 1 ended the job: JobMismatch: {SAID}"
    assert _failure(cause=cause).describe() == f"{HEADLINE}with exit code 1): {cause}"


@pytest.mark.mpi
@pytest.mark.timeout(100)
def test_a_json_log_under_mpi_reports_the_words_alone(tmp_path):
    mpiexec_or_skip()
    argv = [sys.executable, "-m", "launcher", "mpi", "-np", "2", "--mpi-flavor", "mpich",
            "--run-dir", str(tmp_path / "run"), "--", sys.executable, str(OTHER_JOB),
            str(tmp_path / "out"), "--log-format", "json"]  # fmt: skip
    done = run_job(argv, env={k: v for k, v in ENV.items() if k != "DISTCONV_DEBUG"}, timeout=80)
    assert done.returncode == 1, done.stderr[-3000:]
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert report["cause"] in (SAID, "rank 0 and rank 1 run different jobs: config.batch_size: "
                               "8 here, 16 there"), report  # fmt: skip


def test_a_restart_of_the_rank_that_set_the_job_with_another_is_the_cause():
    """A shard refuses it as ``rank 0 runs another job than its first hello`` (its own
    words, here), and the ranks it leaves waiting hear it first: every rank stops on it, as
    on the ranks' different jobs, so none that exited first is blamed."""
    said = different_jobs(0, 0, "config.batch_size: 16 here, 8 there")
    waited = f"{said}; ranks are at different points of the job (rank 1 (host h): ...): why"
    for line, cause in (
        (f"distconv train: error: rank 0, hello: pserver 127.0.0.1:5: {said}", said),
        ("[1] " + _json(f"distconv train: error: rank 1, step 3: pserver h:5: {waited}"), waited),
    ):
        failure = _failure(line)
        assert failure.cause == cause, line
        assert failure.describe() == f"{HEADLINE}with exit code 1): {cause}"
        assert failure.failed_rank is None, failure  # nor in failure.json


#: a rank's mismatch and exit, the other rank's 75 (stopped because another rank failed):
#: Hydra's exit status ORs theirs, 75, apart from the failing rank's 1
_MISMATCH_AND_75 = f"""import os, sys
if os.environ.get("PMI_RANK", os.environ.get("OMPI_COMM_WORLD_RANK")) == "1":
    sys.exit(75)
print("distconv train: error: {SAID}", file=sys.stderr, flush=True)
sys.exit(1)
"""


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_a_mismatch_is_the_cause_whatever_mpiexecs_status(tmp_path):
    """Where mpiexec's status (Hydra's OR of its ranks', 75) differs from the failing rank's
    (1), the cause was that difference, ``a rank exited with code 1; mpiexec itself exited
    with code 75``, the rank's mismatch line not read: it leads the cause, and the headline
    blames no rank."""
    mpiexec_or_skip()
    script = tmp_path / "rank.py"
    script.write_text(_MISMATCH_AND_75)
    argv = [sys.executable, "-m", "launcher", "mpi", "-np", "2", "--mpi-flavor", "mpich",
            "--run-dir", str(tmp_path / "run"), "--", sys.executable, str(script)]  # fmt: skip
    done = run_job(argv, env=ENV, timeout=50)
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert report["cause"].startswith(f"{SAID}; "), report["cause"]
    assert "the ranks run different jobs, which stops every rank" in done.stderr, done.stderr


def test_a_mismatch_quoted_again_by_where_the_ranks_were_is_said_once():
    """A rank left waiting says the mismatch, then where each rank was, the one that closed
    quoting it again: the cause, printed and in ``failure.json``, was all of it (some 900
    characters, the mismatch twice); it is the mismatch alone. A line of a real run."""
    said = (
        "rank 1 and rank 0 run different jobs: config.batch_size: 16 here, 8 there (here: rank "
        "1's hello; there: rank 0's, the first the shard accepted)"
    )
    line = (
        f"distconv train: error: rank 0, all_equal:1: pserver 127.0.0.1:5: {said}; ranks are at "
        "different points of the job (rank 0 (host vm, no step since its hello): comparing job "
        "descriptions (start-up) (all_equal:1); rank 1 (host vm, no step since its "
        "hello): closed on "
        f'"JobRefused: rank 1, hello: pserver 127.0.0.1:5: {said}"): a rank closed (bye) while '
        "another waits in a collective"
    )
    failure = _failure(line)
    assert failure.cause == said
    assert failure.describe() == f"{HEADLINE}with exit code 1): {said}"
