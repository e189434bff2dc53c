"""A launcher flag that would change nothing in the job is a usage error, not ignored.

``local --servers 0 --mode async`` or ``--insecure`` (no shards to set), ``k8s --mpi --mode
async`` (an MPIJob has no shards), ``k8s --servers N --slots-per-worker 4`` (slots are an
MPIJob's) and ``mpi --dry-run --max-restarts 3`` or ``--grace`` (the printed mpiexec command is
supervised by nobody) used to run, render or print as if the flag were not there. A flag
given its default value changes nothing either way, and stays accepted.
"""

from __future__ import annotations

import pytest

from tests.launcher.launch_cli import launch

K8S = ("k8s", "--workers", "4", "--image", "d:1")


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    "argv, said",
    [
        (("local", "--workers", "1", "--servers", "0", "--mode", "async"),
         "--mode async is for the parameter-server shards, and --servers 0 starts none"),
        (("local", "--workers", "1", "--servers", "0", "--insecure"),
         "--insecure is for the parameter-server shards, and --servers 0 starts none"),
        ((*K8S, "--mpi", "--mode", "async"),
         "--mode async is for parameter-server shards, and --mpi renders an MPIJob"),
        ((*K8S, "--servers", "0", "--mode", "async"),
         "--mode async is for parameter-server shards, and --servers 0 renders an MPIJob"),
        ((*K8S, "--servers", "2", "--slots-per-worker", "4"),
         "--slots-per-worker 4 is for an MPIJob (--servers 0 or --mpi); --servers 2 runs one"),
        ((*K8S, "--slots-per-worker", "2"),
         "--slots-per-worker 2 is for an MPIJob (--servers 0 or --mpi); a parameter-server job"),
        (("mpi", "-np", "2", "--dry-run", "--max-restarts", "3"),
         "--max-restarts 3 is for a job the launcher runs, and --dry-run only prints the mpiexec"),
        (("mpi", "-np", "2", "--dry-run", "--grace", "5"),
         "--grace 5 is for a job the launcher runs, and --dry-run only prints the mpiexec"),
    ],
)  # fmt: skip
def test_a_flag_that_changes_nothing_is_a_usage_error(tmp_path, argv, said):
    run_dir = tmp_path / "run"
    own = ("--run-dir", str(run_dir)) if argv[0] != "k8s" else ()
    done = launch(*argv, *own, "--", "--epochs", "1", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    last = done.stderr.strip().splitlines()[-1]  # argparse's: usage, then this line
    assert last.startswith(f"distconv-launch {argv[0]}: error: {said}"), last
    assert not run_dir.exists()  # nothing started


@pytest.mark.timeout(90)
def test_a_flag_given_its_default_value_is_accepted(tmp_path):
    # checked past the launcher's own flags: the program after -- is what stops it (rc 1)
    done = launch(
        "local", "--workers", "1", "--servers", "0", "--mode", "sync", "--", "no-such-program",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "'no-such-program' is neither a program on PATH" in done.stderr
    for shape in (("--servers", "2", "--slots-per-worker", "1"), ("--mpi", "--mode", "sync")):
        done = launch(*K8S, *shape, "--", "--epochs", "1", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "kind: " in done.stdout
