"""The folders a launch writes into (``--run-dir``, ``k8s --out``): a blank one, as an unset
variable gives (``--run-dir "$RUN_DIR"``), and a file where the folder should be, are usage
errors naming the flag, before anything is made or started."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from launcher.shown import shown
from tests.launcher.launch_cli import ENV, launch

COMMANDS = {
    "local": ("local", "--workers", "1", "--servers", "0", "--run-dir"),
    "mpi": ("mpi", "-np", "2", "--dry-run", "--run-dir"),
    "k8s": ("k8s", "--workers", "2", "--image", "d:1", "--out"),
}


@pytest.mark.timeout(90)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_blank_folder_is_a_usage_error_not_the_default(tmp_path, command):
    """A blank ``--run-dir`` was taken for none: the job ran in a new ``runs/<job-id>``, so
    a job launched again to continue in its run directory started afresh elsewhere; a blank
    ``k8s --out`` wrote the YAML to stdout instead of a folder."""
    done = launch(*COMMANDS[command], "", "--", "--epochs", "1", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    flag = COMMANDS[command][-1]
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"distconv-launch {command}: error: argument {flag}: must not be empty", last
    assert list(tmp_path.iterdir()) == []  # no runs/ made, nothing started


@pytest.mark.timeout(90)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_file_where_the_folder_goes_is_named_as_such(tmp_path, command):
    """It failed with ``[Errno 17] File exists: '...'``, which reads as if an existing
    folder were the trouble (mpi after saying it had started the job)."""
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    done = launch(*COMMANDS[command], str(taken), "--", "--epochs", "1", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    flag = COMMANDS[command][-1]
    last = done.stderr.strip().splitlines()[-1]
    said = (
        f"distconv-launch {command}: error: argument {flag}: {shown(taken)} is a file, not a folder"
    )
    assert last == said, last
    assert "distconv-launch: job" not in done.stderr  # nothing said to have started
    assert taken.read_text() == "mine\n" and sorted(tmp_path.iterdir()) == [taken]


@pytest.mark.timeout(60)
def test_distconv_keys_into_a_blank_or_a_file_is_a_usage_error(tmp_path):
    """``distconv keys "$KEYS" --workers 1`` with the variable unset wrote the secret keys
    into the working directory (exit 0); into a file it said ``[Errno 17] File exists``."""
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    file = f"{taken} is a file, not a folder"
    for where, said in (("", "must not be empty"), (str(taken), file)):
        done = subprocess.run(
            [sys.executable, "-m", "distconv", "keys", where, "--workers", "1"],
            env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=50,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines()[-1] == f"distconv keys: error: argument dir: {said}"
        assert sorted(tmp_path.iterdir()) == [taken] and taken.read_text() == "mine\n"


@pytest.mark.timeout(90)
@pytest.mark.parametrize("command", ["local", "mpi"])
def test_a_file_at_the_job_ids_run_dir_is_named_not_errno_17(tmp_path, command):
    """``--job-id J`` puts the run in ``runs/J``: a file there still failed with ``[Errno 17]
    File exists``; mpi --dry-run printed a command whose ``--out``
    lies under the file."""
    if command == "mpi" and shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not installed")
    (tmp_path / "runs").mkdir()
    taken = tmp_path / "runs" / "j1"
    taken.write_text("mine\n")
    flags = {"local": ("local", "--workers", "1", "--servers", "0"), "mpi": ("mpi", "-np", "1")}
    extra = ("--dry-run",) if command == "mpi" else ()
    program = ("--", "distconv", "train")
    done = launch(*flags[command], *extra, "--job-id", "j1", *program, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]
    said = f"distconv-launch {command}: error: the run directory {shown(taken)} cannot be made: "
    assert (
        last
        == f"{said}{shown(taken)} is a file, not a folder (choose another --run-dir or --job-id)"
    )
    assert taken.read_text() == "mine\n"


@pytest.mark.timeout(90)
def test_a_symlink_to_nowhere_is_named_not_errno_17(tmp_path):
    """A dangling symlink passed the folder type (``os.path.exists`` follows it) and failed on
    ``[Errno 17] File exists``: ``distconv keys LINK``, ``--run-dir LINK``."""
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "missing" / "dir")
    said = f"{link} is a symlink to {tmp_path / 'missing' / 'dir'}, not there"
    quoted = f"{shown(link)} is a symlink to {shown(tmp_path / 'missing' / 'dir')}, not there"
    done = subprocess.run(
        [sys.executable, "-m", "distconv", "keys", str(link), "--workers", "1"],
        env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=50,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"distconv keys: error: argument dir: {said}"
    done = launch(*COMMANDS["local"], str(link), "--", "true", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"distconv-launch local: error: argument --run-dir: {quoted}", last
    assert not (tmp_path / "missing").exists()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("command", ["local", "mpi"])
def test_a_runs_folder_linked_to_nowhere_is_named_not_errno_17(tmp_path, command):
    """``runs -> /scratch/runs`` with the scratch unmounted: the run directory ``runs/J``
    failed on ``[Errno 17] File exists: '.../runs'``, which no flag's type saw, and so did
    ``--run-dir LINK/sub`` and ``distconv keys LINK/sub`` (56f2437 and dd5a27a left them)."""
    if command == "mpi" and shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not installed")
    runs, gone = tmp_path / "runs", tmp_path / "scratch" / "runs"
    runs.symlink_to(gone)
    said = f"{runs} is a symlink to {gone}, not there"
    quoted = f"{shown(runs)} is a symlink to {shown(gone)}, not there"  # as the launcher says it
    flags = {"local": ("local", "--workers", "1", "--servers", "0"), "mpi": ("mpi", "-np", "1")}
    extra = ("--dry-run",) if command == "mpi" else ()
    done = launch(*flags[command], *extra, "--job-id", "j1", "--", "true", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]
    run_dir = runs / "j1"
    assert last == (
        f"distconv-launch {command}: error: the run directory {shown(run_dir)} cannot be made: "
        f"{quoted} (choose another --run-dir or --job-id)"
    ), last
    done = launch(*flags[command], *extra, "--run-dir", str(run_dir), "--", "true", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"distconv-launch {command}: error: argument --run-dir: {quoted}", last
    done = subprocess.run(
        [sys.executable, "-m", "distconv", "keys", str(runs / "keys"), "--workers", "1"],
        env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=50,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"distconv keys: error: argument dir: {said}"
    assert not (tmp_path / "scratch").exists()


@pytest.mark.timeout(60)
def test_a_file_above_the_folder_is_named(tmp_path):
    """``distconv keys FILE/keys`` failed on ``[Errno 20] Not a directory``, naming the folder
    asked for rather than the file in its way."""
    taken = tmp_path / "taken"
    taken.write_text("mine\n")
    done = subprocess.run(
        [sys.executable, "-m", "distconv", "keys", str(taken / "keys"), "--workers", "1"],
        env=ENV, cwd=tmp_path, capture_output=True, text=True, timeout=50,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == f"distconv keys: error: argument dir: {taken} is a file, not a folder", last
    assert taken.read_text() == "mine\n"
