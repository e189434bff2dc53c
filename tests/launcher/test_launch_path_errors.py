"""A file or folder the launcher cannot use, named by a flag (``--run-dir``, ``--hostfile``,
``k8s --out``): one line naming the flag and the cause, not Python's ``[Errno 2] No such file
or directory: 'PATH'``, which said neither which flag nor what the path was for."""

from __future__ import annotations

import pytest

from launcher.shown import shown
from tests.launcher.launch_cli import launch

#: a folder under which nothing can be made, even by root: mkdir says ENOENT
UNMAKEABLE = "/proc/distconv-nope"
PROGRAM = ("--", "--epochs", "1")


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "command",
    [
        ("local", "--workers", "1", "--servers", "0"),
        ("mpi", "-np", "1", "--mpiexec", "sh", "--mpi-flavor", "mpich"),
    ],
    ids=["local", "mpi"],
)
def test_a_run_dir_that_cannot_be_made_is_named_with_its_flag(tmp_path, command):
    done = launch(*command, "--run-dir", UNMAKEABLE, *PROGRAM, cwd=tmp_path, timeout=50)
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"distconv-launch {command[0]}: error: the run directory '{UNMAKEABLE}' cannot be made: "
        "no such file or directory (choose another --run-dir or --job-id)"
    )  # was: [Errno 2] No such file or directory: '/proc/distconv-nope'
    assert "distconv-launch: job" not in done.stderr  # refused before anything started


@pytest.mark.timeout(60)
def test_a_hostfile_that_cannot_be_read_is_named_with_its_flag(tmp_path):
    (tmp_path / "a-folder").mkdir()
    for hostfile, cause in (
        ("missing.txt", "no such file or directory"),
        ("a-folder", "is a directory"),
    ):
        done = launch("mpi", "-np", "2", "--hostfile", hostfile, "--dry-run", *PROGRAM,
                      cwd=tmp_path, timeout=50)  # fmt: skip
        assert (done.returncode, done.stdout) == (1, ""), done.stderr
        said = f"--hostfile {shown(hostfile)}: cannot read it: {cause}"
        assert done.stderr == f"distconv-launch mpi: error: {said}\n"


@pytest.mark.timeout(60)
def test_a_k8s_out_that_cannot_be_made_is_named_with_its_flag(tmp_path):
    done = launch("k8s", "--workers", "1", "--image", "d:1", "--out", UNMAKEABLE, cwd=tmp_path,
                  timeout=50)  # fmt: skip
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr == (
        f"distconv-launch k8s: error: --out {shown(UNMAKEABLE)}: cannot write there: no such "
        "file or directory\n"
    )  # quoted as --hostfile's path is


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "after, said",
    [
        (["--epochs", "x"], "argument --epochs: must be an integer, got 'x'"),
        (["--mode", "async"], "asynchronous SGD needs parameter-server shards"),  # its hint
    ],
    ids=["value", "async"],
)
def test_an_unreadable_hostfile_comes_after_the_usage_error_of_the_train_arguments(
    tmp_path, after, said
):
    """Reading the hosts first made '--hostfile nope -- --epochs x' exit 1, 'cannot
    read it', and lost the async hint: the arguments after -- are judged first."""
    done = launch("mpi", "-np", "2", "--hostfile", "nope", "--dry-run", "--", *after,
                  cwd=tmp_path, timeout=50)  # fmt: skip
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert said in done.stderr and "--hostfile" not in done.stderr, done.stderr
