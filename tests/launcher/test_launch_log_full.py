"""A child's log that cannot be written (a full disk) neither hangs the job nor loses its lines.

The thread copying a child's output died on the log's ENOSPC with a traceback; nothing read
the child's pipe after that, so a child that went on printing blocked on its next write for
good: the job hung, and its lines reached neither the log nor the launcher's output.
"""

from __future__ import annotations

import json
import os
import resource
import signal
from pathlib import Path

import pytest

from tests.launcher.launch_cli import ENV, launch, launcher_command
from tests.processes import run_job

#: more than a pipe holds (64 KiB), so a child whose pipe nobody reads blocks
PRINTS = "import sys\nfor i in range(3000): print('line', i, 'x' * 60)\nsys.exit(3)\n"


@pytest.mark.timeout(60)
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_disk_under_the_log_keeps_the_lines_flowing(tmp_path: Path):
    script, run = tmp_path / "prints.py", tmp_path / "run"
    script.write_text(PRINTS)
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "worker-0.log").symlink_to("/dev/full")  # every write: ENOSPC
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--run-dir", str(run), "--", str(script),
        cwd=tmp_path, timeout=30,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr  # the child's own status: it ran to its end
    assert done.stdout.count("[worker 0] line ") == 3000
    assert "Traceback" not in done.stderr
    said = f"cannot write '{run / 'logs' / 'worker-0.log'}': no space left on device; worker-0's"
    assert said in done.stderr
    assert "worker 0 failed with exit code 3" in done.stderr
    assert "line 2999 " in done.stderr  # the report's tail still has the last lines


def _dying_worker(run: Path, cwd: Path):
    """A launch into run directory ``run`` of one worker that says ``dying`` and exits 3."""
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--run-dir", str(run), "--",
        "sh", "-c", "echo dying; exit 3",
        cwd=cwd, timeout=30,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    return done


@pytest.mark.timeout(60)
def test_a_report_that_cannot_be_written_is_still_said(tmp_path: Path):
    """failure.json on a full disk: the failure was lost, the launcher said only the write's
    error and exited 1, not the child's status."""
    run = tmp_path / "run"
    (run / "failure.json.tmp").mkdir(parents=True)  # the report's write fails (EISDIR)
    done = _dying_worker(run, tmp_path)
    assert "worker 0 failed with exit code 3 (after 0 restart(s)); last lines of" in done.stderr
    assert "    dying\n" in done.stderr
    assert f"report not written: '{run / 'failure.json.tmp'}': is a directory" in done.stderr
    assert "error:" not in done.stderr


@pytest.mark.timeout(60)
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_report_on_a_log_that_could_not_be_written_says_so(tmp_path: Path):
    """The report's header said ``last lines of '<log>':`` of a log that lost every line (a
    full disk): the lines it shows come from the launcher's memory, and the operator was sent
    to an empty log. It says the log could not be written, and why; so does failure.json."""
    run = tmp_path / "run"
    log = run / "logs" / "worker-0.log"
    log.parent.mkdir(parents=True)
    log.symlink_to("/dev/full")  # opens, but every write: ENOSPC (the run dir's disk is not)
    done = _dying_worker(run, tmp_path)
    header = (
        "worker 0 failed with exit code 3 (after 0 restart(s)); last lines (its log "
        f"'{log}' could not be written: no space left on device):\n    dying\n"
    )
    assert header in done.stderr
    assert "last lines of" not in done.stderr
    report = json.loads((run / "failure.json").read_text())  # the launcher's own disk is fine
    assert report["log"] == str(log) and report["tail"] == ["dying"]
    assert report["log_error"] == "no space left on device"


#: bytes the launcher may write to a file: its log is cut short, failure.json fits
FILE_LIMIT = 4096


def _file_limit() -> None:
    """In the launcher, before it runs: files of at most :data:`FILE_LIMIT` bytes, a write past
    it an error (EFBIG), not the SIGXFSZ that would kill it."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))


@pytest.mark.timeout(60)
def test_a_report_on_a_log_cut_short_says_so(tmp_path: Path):
    """A log that took the child's first lines, then no more (a file-size limit on the launcher,
    a real write error): the report's header says so, and shows the lines the log lacks."""
    run = tmp_path / "run"
    lines = "for i in $(seq 100); do echo line $i xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done"
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", str(run), "--"]
    done = run_job(
        [*launcher_command(), *argv, "sh", "-c", f"{lines}; exit 3"],
        env=ENV, timeout=30, cwd=tmp_path, preexec_fn=_file_limit,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    log = run / "logs" / "worker-0.log"
    assert log.stat().st_size == FILE_LIMIT  # its first lines, the rest lost
    assert "line 100 " not in log.read_text()
    header = (
        "worker 0 failed with exit code 3 (after 0 restart(s)); last lines (its log "
        f"'{log}' could not be written: file too large):\n"
    )
    assert header in done.stderr
    assert "    line 100 " in done.stderr  # the launcher's own: the log lacks it
    report = json.loads((run / "failure.json").read_text())  # under the limit: written
    assert report["log_error"] == "file too large"
    assert report["tail"][-1].startswith("line 100 ")
