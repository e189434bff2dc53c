"""``distconv-launch local|mpi --help`` says what the code does.

``--run-dir`` said it holds "logs, keys and failure.json" under ``mpi`` too, which makes no
keys (its ranks talk through MPI), and named no ``restarts.jsonl``; ``--mpiexec`` said "the
one beside Python, else from PATH", leaving out that beside a Python in a system's own folder
(:data:`launcher.mpi.SHARED_BINS`) PATH's comes first (:func:`launcher.mpi.find_mpiexec`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from launcher.mpi import SHARED_BINS
from tests.launcher.launch_cli import launch

#: what --run-dir's help says of distconv train's run there
TRAIN_RUN = "distconv train's run in train/ (without its own --out)"


def _option_help(tmp_path: Path, command: str, option: str) -> str:
    """The help ``distconv-launch COMMAND --help`` gives ``option``, on one line."""
    done = launch(command, "--help", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split("\noptions:\n", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(option + " "))
    said = [lines[start]]
    for line in lines[start + 1 :]:
        if line.startswith("  -"):  # the next option's; a wrapped line is indented further
            break
        said.append(line)
    metavar = option[2:].upper().replace("-", "_")  # argparse's
    return " ".join(" ".join(said).split()).removeprefix(f"{option} {metavar}").strip()


def test_the_run_dir_of_mpi_names_no_keys(tmp_path: Path):
    said = _option_help(tmp_path, "mpi", "--run-dir")
    assert said.startswith(f"{TRAIN_RUN}, logs, failure.json and restarts.jsonl (default: runs/")
    assert "keys" not in said


def test_the_run_dir_of_local_names_its_keys_where_it_makes_them(tmp_path: Path):
    said = _option_help(tmp_path, "local", "--run-dir")
    assert said.startswith(
        f"{TRAIN_RUN}, logs, CURVE keys (with shards, unless --insecure), failure.json and "
        "restarts.jsonl "
    ), said


def test_the_run_dir_names_the_train_run_where_a_launch_puts_it(tmp_path: Path):
    """distconv train without its own ``--out`` writes its run, checkpoints and metrics, in
    ``<run-dir>/train``, which the help left out though it is most of what the folder holds."""
    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not installed")
    run = tmp_path / "run"
    done = launch(
        "mpi", "-np", "1", "--mpi-flavor", "mpich", "--dry-run", "--run-dir", str(run), "--",
        "--epochs", "1",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith(f"--out {run / 'train'}"), done.stdout
    assert _option_help(tmp_path, "mpi", "--run-dir").startswith(TRAIN_RUN)


def test_the_mpiexec_help_names_the_system_folders_where_path_comes_first(tmp_path: Path):
    said = _option_help(tmp_path, "mpi", "--mpiexec")
    assert said.startswith("the mpiexec to run (default: mpiexec or mpirun beside Python, else "
                           "on PATH; beside a Python in "), said  # fmt: skip
    folders = said.split("beside a Python in ", 1)[1].split(", PATH's first)")[0]
    assert folders.replace(" or ", ", ").split(", ") == list(SHARED_BINS)
