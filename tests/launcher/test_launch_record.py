"""``distconv-launch`` records its own command in the run directory: ``launch.json``, a list
with an object per launch into it (``argv``, ``cwd``, ``job``, ``build``, ``numpy``, ``host``,
``started``). The ``distconv X`` line that starts a job went to the terminal only, and the
command to nowhere, so a run directory said neither which code nor which flags made it. A
resume appends its launch, the first kept; a file there that lists no launches is moved
aside, not written over. Real launcher processes, real children, real files."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import distconv
from distconv.files import hold_lock
from launcher.launch_lock import LAUNCH_LOCK
from launcher.launch_record import ENV_PREFIXES, LAUNCH_NAME, WITHHELD
from launcher.shown import shown
from tests.launcher.launch_cli import ENV, launch, launcher_command
from tests.launcher.real_children import mpiexec_or_skip
from tests.processes import run_job

pytestmark = pytest.mark.timeout(120)

OK = ["--", "sh", "-c", "exit 0"]
#: one worker, no shards, job id j, run directory tmp/run (a list to append the flags to)
LOCAL = ["local", "--workers", "1", "--servers", "0", "--job-id", "j"]
#: a short ``distconv train`` on the synthetic set, its first epoch, then one more on resume
TRAIN = ["--", "--data", "synthetic", "--batch-size", "8", "--no-progress"]


def _local(tmp_path: Path, *rest: str) -> list[str]:
    return [*LOCAL, "--run-dir", str(tmp_path / "run"), *rest]


def _launches(tmp_path: Path) -> list[dict]:
    return json.loads((tmp_path / "run" / LAUNCH_NAME).read_text())


def _assert_is_this_launch(record: dict, argv: list[str], cwd: Path, began: float) -> None:
    assert record["argv"][1:] == argv, record  # [0]: the launcher's own path
    # the command that re-runs it: this interpreter, -m launcher (launcher_command), the argv
    assert record["command"][-len(argv) :] == argv, record
    assert record["command"][1:3] == ["-m", "launcher"], record
    assert record["cwd"] == str(cwd) and record["job"] == "j", record
    assert record["build"] == distconv.build_id(), record
    assert record["numpy"] == np.__version__ and record["host"] == socket.gethostname(), record
    started = time.mktime(time.strptime(record["started"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert began - 1 <= started <= time.time() + 1, record  # UTC, to the second


def test_a_local_launch_records_its_command_build_numpy_host_and_start(tmp_path: Path):
    began, argv = time.time(), _local(tmp_path, *OK)
    done = launch(*argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (record,) = _launches(tmp_path)
    _assert_is_this_launch(record, argv, tmp_path, began)


def test_an_mpi_launch_records_itself_too(tmp_path: Path):
    mpiexec_or_skip()
    began = time.time()
    argv = ["mpi", "-np", "1", "--job-id", "j", "--run-dir", str(tmp_path / "run"), *OK]
    done = launch(*argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (record,) = _launches(tmp_path)
    _assert_is_this_launch(record, argv, tmp_path, began)


def test_a_resume_appends_its_launch_and_keeps_the_first(tmp_path: Path):
    first = _local(tmp_path, *TRAIN, "--epochs", "1")
    assert launch(*first, cwd=tmp_path).returncode == 0
    (kept,) = _launches(tmp_path)
    began, resumed = time.time(), _local(tmp_path, *TRAIN, "--epochs", "2", "--resume")
    done = launch(*resumed, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "resumed from" in done.stdout + done.stderr  # a real resume, of the first's run
    then, now = _launches(tmp_path)
    assert then == kept  # the first launch's record, as it was
    _assert_is_this_launch(now, resumed, tmp_path, began)


def test_a_launch_refused_for_a_run_dir_in_use_records_nothing_there(tmp_path: Path):
    """Two launches into one run directory: the second is refused by the first's lock, and the
    record is written only under the lock, so the list says the launches that ran, and no two
    launchers ever write it at once (one would drop the other's record)."""
    assert launch(*_local(tmp_path, *OK), cwd=tmp_path).returncode == 0
    (kept,) = _launches(tmp_path)
    held = hold_lock(tmp_path / "run" / LAUNCH_LOCK)  # a launch running there: its flock
    try:
        done = launch(*_local(tmp_path, *OK), cwd=tmp_path)
    finally:
        os.close(held)
    assert done.returncode == 1 and "is in use by the launch of pid" in done.stderr, done.stderr
    assert _launches(tmp_path) == [kept]


def test_a_file_that_lists_no_launches_is_moved_aside_not_written_over(tmp_path: Path):
    (tmp_path / "run").mkdir()
    damaged = b'[{"argv": ["distconv-launch", "local"'  # cut off mid-write by another tool
    (tmp_path / "run" / LAUNCH_NAME).write_bytes(damaged)
    (tmp_path / "run" / "launch.json.unreadable").write_bytes(b"an earlier one")
    done = launch(*_local(tmp_path, *OK), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    aside = tmp_path / "run" / "launch.json.unreadable.2"
    assert aside.read_bytes() == damaged  # kept whole, beside the earlier one
    assert (tmp_path / "run" / "launch.json.unreadable").read_bytes() == b"an earlier one"
    said = f"{shown(tmp_path / 'run' / LAUNCH_NAME)} is not JSON ("
    assert said in done.stderr and f"moved to {shown(aside)}, and a new list" in done.stderr
    assert len(_launches(tmp_path)) == 1


def test_a_file_nested_too_deep_to_parse_is_moved_aside_and_the_job_runs(tmp_path: Path):
    """json.loads raises RecursionError, no ValueError, on '[[[...': the launcher died of it
    with a traceback before starting the job."""
    (tmp_path / "run").mkdir()
    nested = b"[" * 100_000  # garbage a broken tool or a disk left there
    (tmp_path / "run" / LAUNCH_NAME).write_bytes(nested)
    done = launch(*_local(tmp_path, "--", "sh", "-c", "echo ran"), cwd=tmp_path)
    assert done.returncode == 0 and "ran" in done.stdout, done.stderr
    aside = tmp_path / "run" / "launch.json.unreadable"
    assert aside.read_bytes() == nested and len(_launches(tmp_path)) == 1
    assert f"moved to {shown(aside)}, and a new list" in done.stderr


def test_a_named_pipe_in_its_place_is_moved_aside_and_the_job_runs(tmp_path: Path):
    """Read, a named pipe waited for a writer for ever: the launcher hung with the run
    directory locked, its job never started, nothing said."""
    (tmp_path / "run").mkdir()
    os.mkfifo(tmp_path / "run" / LAUNCH_NAME)
    done = launch(*_local(tmp_path, "--", "sh", "-c", "echo ran"), cwd=tmp_path, timeout=30)
    assert done.returncode == 0 and "ran" in done.stdout, done.stderr
    aside = tmp_path / "run" / "launch.json.unreadable"
    assert stat.S_ISFIFO(aside.lstat().st_mode) and len(_launches(tmp_path)) == 1
    said = f"{shown(tmp_path / 'run' / LAUNCH_NAME)} is a named pipe (FIFO), not a file: moved to"
    assert f"{said} {shown(aside)}, and a new list" in done.stderr, done.stderr


def test_a_record_that_cannot_be_written_is_a_warning_and_the_job_runs(tmp_path: Path):
    (tmp_path / "run" / LAUNCH_NAME).mkdir(parents=True)  # a folder in its place
    done = launch(*_local(tmp_path, "--", "sh", "-c", "echo ran"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ran" in done.stdout
    # the read failed, not a write: the words say what was not done, and why
    warning = f"cannot record this launch in {shown(tmp_path / 'run' / LAUNCH_NAME)}: is a "
    assert warning + "directory; the job goes on, its launch not recorded there" in done.stderr


def test_a_launch_records_its_python_and_the_environment_that_changes_what_runs(tmp_path: Path):
    """The workers run the launcher's own Python (a virtual environment's), and the thread,
    device and BLAS variables it inherits change what they compute or how: a re-run needs
    both as much as the command line. Other variables (a token, a path) are not recorded."""
    env = {**ENV, "DISTCONV_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_PROC_BIND": "x"}
    env["SOME_TOKEN"] = "not for the record"
    done = run_job([*launcher_command(), *_local(tmp_path, *OK)], env=env, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (record,) = _launches(tmp_path)
    assert record["python"] == sys.executable, record  # the tests' launcher: this Python
    ours = {k: v for k, v in env.items() if k.startswith(ENV_PREFIXES)}
    assert record["env"] == ours and record["env"]["OPENBLAS_NUM_THREADS"] == "1", record
    assert record["env"]["DISTCONV_NUM_THREADS"] == "1" and "SOME_TOKEN" not in record["env"]


def test_a_variable_whose_name_says_it_is_a_secret_is_named_but_its_value_withheld(
    tmp_path: Path,
):
    """A program of one's own may take its token from a DISTCONV_ variable; launch.json is
    readable by whoever reads the run directory, so the value is not written, only that it was
    set. distconv's own DISTCONV_KEYS names a folder and is recorded as it is."""
    secrets = {"DISTCONV_HF_TOKEN": "hf_abc123", "DISTCONV_WANDB_API_KEY": "0123abcd"}
    env = {**ENV, **secrets, "DISTCONV_KEYS": str(tmp_path / "keys")}
    done = run_job([*launcher_command(), *_local(tmp_path, *OK)], env=env, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (record,) = _launches(tmp_path)
    assert {name: record["env"][name] for name in secrets} == dict.fromkeys(secrets, WITHHELD)
    assert record["env"]["DISTCONV_KEYS"] == str(tmp_path / "keys"), record
    text = (tmp_path / "run" / LAUNCH_NAME).read_text()
    assert not any(value in text for value in secrets.values()), text
