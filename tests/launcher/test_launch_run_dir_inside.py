"""What the launcher itself makes inside the run directory, in the way: ``logs`` a file,
``failure.json`` (a report of a run before, removed) a folder, a child's log a folder. Each
is one line naming the path and the cause, and the run directory's lock is let go; the
launcher said Python's ``[Errno 17] File exists: '.../logs'`` (``[Errno 21] Is a directory``),
naming neither the run directory nor what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.shown import shown
from launcher.supervisor import LaunchError, Supervisor
from tests.launcher.launch_cli import launch

LOCAL = ("local", "--workers", "1", "--servers", "0", "--", "--epochs", "1")


def _in_the_way(run_dir: Path, what: str) -> Path:
    """``run_dir`` with ``what`` in the way: ``logs`` a file, ``failure.json`` or the worker's
    log a folder; the path in the way."""
    (run_dir / "logs").mkdir(parents=True)
    if what == "logs":
        (run_dir / "logs").rmdir()
        (run_dir / "logs").write_text("not a folder\n")
        return run_dir / "logs"
    path = run_dir / ("failure.json" if what == "report" else "logs/worker-0.log")
    path.mkdir()
    return path


#: what the launcher says of each, after ``the run directory D cannot be used: ``
CAUSES = {"logs": "{} is a file, not a folder", "report": "'{}': is a directory"}


def _refusal(tmp_path: Path, what: str) -> tuple[str, Path]:
    """The real launcher's last line where ``what`` is in the way in its run directory (exit
    status 1, nothing on stdout), and the path in the way."""
    run_dir = tmp_path / "run"
    path = _in_the_way(run_dir, what)
    done = launch(*LOCAL[:5], "--run-dir", str(run_dir), *LOCAL[5:], cwd=tmp_path, timeout=50)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    return done.stderr.splitlines()[-1], path


@pytest.mark.timeout(60)
@pytest.mark.parametrize("what", sorted(CAUSES))
def test_a_path_in_the_run_directory_in_the_way_is_named(tmp_path, what):
    said, path = _refusal(tmp_path, what)
    it = shown(path) if what == "logs" else path  # folder_problem's, quoted
    assert said == (
        f"distconv-launch local: error: the run directory {shown(tmp_path / 'run')} cannot be "
        f"used: {CAUSES[what].format(it)} (move it away, or choose another --run-dir or --job-id)"
    )  # was: [Errno 17] File exists: '.../logs' ([Errno 21] Is a directory: '...')


@pytest.mark.timeout(60)
def test_a_child_log_in_the_way_is_named_with_its_child(tmp_path):
    said, path = _refusal(tmp_path, "log")
    assert said == (
        f"distconv-launch local: error: cannot start worker-0: its log '{path}': is a directory"
    )  # was: [Errno 21] Is a directory: '.../logs/worker-0.log'


@pytest.mark.timeout(10)
def test_a_refused_run_directory_is_let_go(tmp_path):
    """Supervisor.run lets the run directory's lock go at its end, a refusal too: a second
    supervisor there was told that the first still held it."""
    _in_the_way(tmp_path, "logs")
    with pytest.raises(LaunchError, match="cannot be used"):
        Supervisor(tmp_path).run(lambda restart: [])
    second = Supervisor(tmp_path)
    second.claim()  # raised "... is in use by the launch of ..."
    second.unclaim()
