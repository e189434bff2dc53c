"""The paths the launcher's folder and hostfile refusals name are quoted, as its other lines
quote a path (:func:`launcher.shown.shown`): written bare, one with a space in it read as
words of the message (``the run directory 'run 1' cannot be used: run 1/logs is a file``),
and ``--hostfile my hosts: cannot read it`` as a flag and a stray word."""

from __future__ import annotations

import pytest

from launcher.shown import shown
from tests.launcher.launch_cli import launch

LOCAL = ("local", "--workers", "1", "--servers", "0")


def _last(done) -> str:
    return done.stderr.strip().splitlines()[-1]


@pytest.mark.timeout(60)
def test_a_file_in_the_way_of_the_logs_is_named_quoted(tmp_path):
    run_dir = tmp_path / "run 1"
    run_dir.mkdir()
    (run_dir / "logs").write_text("not a folder\n")
    done = launch(*LOCAL, "--run-dir", str(run_dir), "--", "true", cwd=tmp_path, timeout=50)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert _last(done) == (
        f"distconv-launch local: error: the run directory {shown(run_dir)} cannot be used: "
        f"{shown(run_dir / 'logs')} is a file, not a folder (move it away, or choose another "
        "--run-dir or --job-id)"
    )


@pytest.mark.timeout(60)
def test_a_run_dir_under_a_file_or_a_dangling_link_is_named_quoted(tmp_path):
    taken = tmp_path / "my file"
    taken.write_text("mine\n")
    link, gone = tmp_path / "my link", tmp_path / "it's gone"
    link.symlink_to(gone)
    for run_dir, said in (
        (taken / "run", f"{shown(taken)} is a file, not a folder"),
        (link / "run", f"{shown(link)} is a symlink to {shown(gone)}, not there"),
    ):
        done = launch(*LOCAL, "--run-dir", str(run_dir), "--", "true", cwd=tmp_path, timeout=50)
        assert done.returncode == 2, done.stderr
        assert _last(done) == f"distconv-launch local: error: argument --run-dir: {said}"


@pytest.mark.timeout(60)
def test_a_hostfile_refused_is_named_quoted(tmp_path):
    """Read before mpiexec is looked for: no MPI needed here."""
    missing, empty = tmp_path / "my hosts", tmp_path / "no hosts"
    empty.write_text("# none yet\n")
    for hostfile, said in (
        (missing, f"--hostfile {shown(missing)}: cannot read it: no such file or directory"),
        (empty, f"--hostfile {shown(empty)} names no hosts"),
    ):
        done = launch("mpi", "-np", "1", "--hostfile", str(hostfile), "--dry-run", "--", "true",
                      cwd=tmp_path, timeout=50)  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert _last(done) == f"distconv-launch mpi: error: {said}"


def test_keys_that_do_not_fit_and_an_mpiexec_that_cannot_run_are_named_quoted(tmp_path):
    """In process: ``make_keys`` reads the keys there, ``detect_flavor`` runs the file."""
    from distconv.sync.ps.keys import make_keys as write_keys
    from launcher.commands import LaunchError
    from launcher.job_keys import make_keys
    from launcher.mpi import detect_flavor

    keys_dir = tmp_path / "run 1" / "keys"
    write_keys(keys_dir, 1)
    with pytest.raises(LaunchError) as refused:
        make_keys(keys_dir, 2)
    assert str(refused.value).startswith(f"{shown(keys_dir)} ")
    assert f" worker(s), remove {shown(keys_dir)} and launch again" in str(refused.value)
    mpiexec = tmp_path / "my mpiexec"
    mpiexec.write_text("not run\n")  # not executable: PermissionError
    with pytest.raises(LaunchError) as refused:
        detect_flavor(str(mpiexec))
    assert str(refused.value).startswith(f"cannot run {shown(mpiexec)} --version: ")
