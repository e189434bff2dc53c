"""``--run-dir``'s help names ``launch.json``, which every launch writes there
(:mod:`launcher.launch_record`): the help listed the logs, keys and reports but not the file an
operator reads for the command, build and environment that started a job."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.launch_record import LAUNCH_NAME
from tests.launcher.test_launch_help_texts import _option_help


@pytest.mark.parametrize("command", ["local", "mpi"])
def test_the_run_dir_help_names_the_launch_record(tmp_path: Path, command: str):
    said = _option_help(tmp_path, command, "--run-dir")
    assert f"{LAUNCH_NAME} lists each launch's command, build and environment" in said, said
