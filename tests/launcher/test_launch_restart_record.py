"""Each failure a restart recovered from is a line of ``<run-dir>/restarts.jsonl``.

``failure.json`` is written only for the failure that ends a job: after a run that a restart
saved, the launcher exited 0 and an operator had no record of what had failed but its stdout and
the appended logs. Now each failure a restart follows is a JSON line there (``failure.json``'s
fields, ``then`` the restart), the job's last line names the file, a launch clears the file of
the launch before it, and a file that cannot be written is a warning, never the job's end.
Real launches of :data:`FAILS_FIRST`, and of a real ``mpiexec -n 2``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher.report import REPORT_ONLY
from launcher.restarts import append_whole
from tests.launcher.attempt_logs import logged
from tests.launcher.launch_cli import launch, run_python
from tests.launcher.real_children import mpiexec_or_skip
from tests.processes import job_left

#: ``FAILS_FIRST N [full]``: attempts 0 to N - 1 exit 3 (rank 1 alone under MPI), the next
#: succeeds; ``full``: attempt 0 first puts a link to /dev/full (a full disk) where
#: run/restarts.jsonl goes
FAILS_FIRST = """\
import os, sys
restart, rank = int(os.environ["DISTCONV_RESTART"]), os.environ.get("PMI_RANK", "1")
if sys.argv[2:] == ["full"] and restart == 0:
    os.symlink("/dev/full", "run/restarts.jsonl")
if restart < int(sys.argv[1]) and rank == "1":
    print(f"attempt {restart} fails", flush=True)
    sys.exit(3)
print(f"attempt {restart} works", flush=True)
"""


def _local(
    tmp_path: Path, fails: int, restarts: int, *how: str, run: str = "run", source: str = ""
):
    """``distconv-launch local`` of one worker running :data:`FAILS_FIRST` ``fails`` ``how``
    (``source``, given: that script, with no arguments) with ``--max-restarts`` ``restarts``,
    as job ``j``, in ``tmp_path``; nothing of it left."""
    script = tmp_path / "worker.py"
    script.write_text(source or FAILS_FIRST)
    arguments = () if source else (str(fails), *how)
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--max-restarts", str(restarts),
        "--run-dir", run, "--job-id", "j", "--", str(script), *arguments,
        cwd=tmp_path, timeout=50,
    )  # fmt: skip
    assert job_left(done.env, 5) == {}
    return done


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _finished(run: Path, restarts: int) -> str:
    return (
        f"distconv-launch: job j finished after {restarts} restart(s); what each one recovered "
        f"from: '{run / 'restarts.jsonl'}'\n"
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fails", [1, 2])
def test_each_failure_a_restart_followed_is_a_line_with_failure_jsons_fields(tmp_path, fails):
    run = tmp_path / "run"
    done = _local(tmp_path, fails, 2)
    assert done.returncode == 0, done.stderr
    assert not (run / "failure.json").exists()  # the job did not fail
    lines = _lines(run / "restarts.jsonl")
    assert [(e["restart"], e["then"]) for e in lines] == [
        (n, f"restarting the job ({n + 1} of 2)") for n in range(fails)
    ]
    log = str(run / "logs" / "worker-0.log")
    for n, entry in enumerate(lines):
        assert (entry["role"], entry["rank"], entry["exit_code"], entry["signal"]) == (
            "worker", 0, 3, None,
        )  # fmt: skip
        assert (entry["log"], entry["tail"], entry["max_restarts"]) == (
            log, [f"attempt {n} fails"], 2,
        )  # fmt: skip  # the attempt's own last lines, though its log holds the one before
    # the same failure ending a job with no restarts left: failure.json, the same fields
    alone = _local(tmp_path, 1, 0, run="alone")
    assert alone.returncode == 3, alone.stderr
    report = json.loads((tmp_path / "alone" / "failure.json").read_text())
    assert set(report) == {*lines[0], *REPORT_ONLY}  # and the way on of a job that ended
    left = ("time", "then", "log", "max_restarts", *REPORT_ONLY)
    same = {k: v for k, v in report.items() if k not in left}
    assert same == {k: v for k, v in lines[0].items() if k in same}
    assert report["then"] is None and lines[0]["time"] <= report["time"]
    # said as each restart was, then the job's last line names the file
    restarted = "distconv-launch: worker 0 failed with exit code 3; restarting the job ({} of 2)\n"
    said = "".join(restarted.format(n + 1) for n in range(fails))
    assert done.stderr.endswith(said + _finished(run, fails)), done.stderr


@pytest.mark.timeout(60)
def test_a_job_that_needed_no_restart_has_no_record_and_clears_the_one_before(tmp_path):
    run = tmp_path / "run"
    first = _local(tmp_path, 1, 1)  # a launch before into the same run directory
    assert first.returncode == 0 and len(_lines(run / "restarts.jsonl")) == 1, first.stderr
    done = _local(tmp_path, 0, 1)
    assert done.returncode == 0, done.stderr
    assert not (run / "restarts.jsonl").exists()  # the first launch's removed
    assert "finished after" not in done.stderr and "restarts.jsonl" not in done.stderr
    assert done.stderr.count("\n") == 1, done.stderr  # the job's line alone: 'job j: ...'


@pytest.mark.timeout(60)
def test_a_record_that_cannot_be_written_is_a_warning_and_the_job_goes_on(tmp_path):
    run = tmp_path / "run"
    (run / "restarts.jsonl").mkdir(parents=True)  # a folder in its place: no launch's record
    done = _local(tmp_path, 1, 1)
    assert done.returncode == 0, done.stderr  # restarted, and succeeded
    path = run / "restarts.jsonl"
    assert done.stderr.endswith(
        "distconv-launch: worker 0 failed with exit code 3; restarting the job (1 of 1)\n"
        f"distconv-launch: cannot write '{path}': is a directory; the job restarts all the "
        "same, this failure recorded only in the line above\n"
        "distconv-launch: job j finished after 1 restart(s); what each one recovered from: the "
        f"lines above ('{path}' could not be written)\n"
    ), done.stderr
    assert path.is_dir() and not any(path.iterdir())  # left as it was
    assert logged(run / "logs" / "worker-0.log") == b"attempt 0 fails\nattempt 1 works\n"


@pytest.mark.timeout(60)
def test_a_full_disk_under_the_record_is_a_warning_for_each_restart(tmp_path):
    """A link to /dev/full, made by the job's first attempt after the launch cleared the run
    directory: each write gets the full disk's ENOSPC."""
    done = _local(tmp_path, 2, 2, "full")
    assert done.returncode == 0, done.stderr
    full = f"cannot write '{tmp_path / 'run' / 'restarts.jsonl'}': no space left on device"
    assert done.stderr.count(full) == 2, done.stderr
    assert "finished after 2 restart(s); what each one recovered from: the lines above" in (
        done.stderr
    )


#: appends a 100-byte line to argv[1] under a file size limit 10 bytes past its end (the
#: kernel then writes 10 bytes, and refuses the rest: a disk full part way through the line)
CUT_SHORT = """\
import os, resource, signal, sys
from pathlib import Path
from launcher.report import REPORT_ONLY
from launcher.restarts import append_whole
path = Path(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, not death
size = path.stat().st_size
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 10, size + 10))
try:
    append_whole(path, b"x" * 99 + b"\\n")
except OSError as exc:
    print(exc.errno)
"""


def test_a_line_cut_short_is_taken_back_whole(tmp_path):
    """A line the disk took part of is cut off again: the next would have continued it, and
    the file's lines were no longer JSON."""
    path = tmp_path / "restarts.jsonl"
    append_whole(path, b'{"restart": 0}\n')
    done = run_python(CUT_SHORT, str(path), cwd=tmp_path, text=True)
    assert done.stdout == "27\n", done.stderr  # EFBIG, after a part was written
    assert path.read_bytes() == b'{"restart": 0}\n'


@pytest.mark.mpi
@pytest.mark.timeout(60)
def test_an_mpi_job_records_what_its_restart_recovered_from(tmp_path):
    mpiexec_or_skip()
    script, run = tmp_path / "fails_first.py", tmp_path / "run"
    script.write_text(FAILS_FIRST)
    done = launch(
        "mpi", "-np", "2", "--mpi-flavor", "mpich", "--max-restarts", "1", "--run-dir", "run",
        "--job-id", "j", "--", str(script), "1", cwd=tmp_path, timeout=50,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert job_left(done.env, 5) == {}
    (entry,) = _lines(run / "restarts.jsonl")
    assert (entry["role"], entry["rank"], entry["exit_code"], entry["restart"]) == (
        "mpiexec", 0, 3, 0,
    )  # fmt: skip  # rank 1's own status, read from Hydra's
    assert entry["then"] == "restarting the job (1 of 1)"
    assert "[1] attempt 0 fails" in entry["tail"], entry["tail"]
    assert done.stderr.endswith(
        "distconv-launch: mpiexec 0 failed with exit code 3; restarting the job (1 of 1)\n"
        + _finished(run, 1)
    ), done.stderr


#: attempt 0 puts a folder where its own log goes, then exits 3: restart 1 cannot open it
BREAKS_ITS_LOG = """\
import os, sys
os.remove("run/logs/worker-0.log")
os.mkdir("run/logs/worker-0.log")
print("attempt 0 fails", flush=True)
sys.exit(3)
"""


@pytest.mark.timeout(60)
def test_a_restart_that_cannot_start_keeps_its_line_and_failure_json_says_why(tmp_path):
    """operations.md: the failure still has its line (its ``then`` the restart it was to be),
    and ``failure.json``, the same failure, says that restart could not start; no line says
    the job finished."""
    run = tmp_path / "run"
    done = _local(tmp_path, 0, 2, source=BREAKS_ITS_LOG)
    assert done.returncode == 3, done.stderr
    (entry,) = _lines(run / "restarts.jsonl")
    report = json.loads((run / "failure.json").read_text())
    assert (entry["restart"], entry["then"]) == (0, "restarting the job (1 of 2)")
    assert report["then"].startswith("restart 1 of 2 could not start: cannot start worker-0: ")
    same = {k: v for k, v in report.items() if k not in ("time", "then", *REPORT_ONLY)}
    assert same == {k: v for k, v in entry.items() if k in same}
    assert "finished after" not in done.stderr, done.stderr


#: every attempt stops as ranks of different jobs do: never restarted
DIFFERENT_JOBS = """\
import sys
print("rank 1 and rank 0 run different jobs: config.batch_size: 16 here, 8 there", flush=True)
sys.exit(1)
"""


@pytest.mark.timeout(60)
def test_ranks_of_different_jobs_are_not_restarted_and_leave_no_record(tmp_path):
    """Not restarted, so no line; the launch before's record is cleared all the same."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "restarts.jsonl").write_text('{"restart": 0}\n')  # a launch before's
    done = _local(tmp_path, 0, 2, source=DIFFERENT_JOBS)
    assert done.returncode == 1, done.stderr
    assert not (run / "restarts.jsonl").exists()
    assert json.loads((run / "failure.json").read_text())["then"].startswith("not restarting")
