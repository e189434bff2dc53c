"""A bad train value after ``--`` is one usage line (exit 2) before any child starts.

``local --workers 2 -- --epochs -1`` used to start the shards and both workers, report worker
1's argparse error as the job's failure, and do it again on every restart; the launcher now
parses the train arguments once with ``distconv train``'s own parser.
"""

from __future__ import annotations

import pytest

from tests.launcher.launch_cli import launch


@pytest.mark.timeout(90)
@pytest.mark.parametrize(
    "command, train, said",
    [
        (("local", "--workers", "2"), ["--epochs", "-1"], "argument --epochs: must be >= 1"),
        (("local", "--workers", "2", "--max-restarts", "3"), ["--lr", "x"], "argument --lr: "),
        # a flag where a value belongs: argparse's reading, not a refusal of --rank
        (("local", "--workers", "2"), ["--out", "--rank"], "argument --out: expected one"),
        (("local", "--workers", "1", "--servers", "0"), ["--ep=0"], "argument --epochs: must"),
        (("mpi", "-np", "2", "--dry-run"), ["--batch-size", "0"], "argument --batch-size: "),
        (("k8s", "--workers", "2", "--image", "d:1"), ["--epochs", "0"], "argument --epochs: "),
        # help, exit 0 and no manifest (or no job, or no mpiexec command) looked like success
        (("k8s", "--workers", "2", "--image", "d:1"), ["--help"], "-h/--help starts no job"),
        (("mpi", "-np", "2", "--dry-run"), ["--epochs", "1", "-h"], "-h/--help starts no job"),
        (("local", "--workers", "1"), ["--hel"], "-h/--help starts no job"),
    ],
)
def test_a_bad_train_value_is_one_usage_line_and_starts_nothing(tmp_path, command, train, said):
    run_dir = tmp_path / "run"
    own = () if command[0] == "k8s" else ("--run-dir", str(run_dir))
    done = launch(*command, *own, "--", *train, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # no manifests, no mpiexec command
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"distconv-launch {command[0]}: error: "), lines
    assert said in lines[0] and lines[0].endswith("(in the distconv train arguments after --)")
    assert not run_dir.exists()  # no keys made, no shard or worker started


@pytest.mark.timeout(90)
def test_good_train_values_still_pass(tmp_path):
    done = launch(
        "mpi", "-np", "2", "--mpi-flavor", "mpich", "--dry-run", "--", "--ep", "2", "--lr",
        "0.05", "--out", str(tmp_path / "o"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--epochs 2 --lr 0.05 --out" in done.stdout
