"""A stop signal while a restart fails to start still ends the launcher with 128 + signal:
it exited with the earlier failure's status, as if no signal had come, where every
other stop, a failure reported or not, exits 128 + the signal's number."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from launcher.child_spec import ChildSpec
from launcher.commands import LaunchError
from launcher.supervisor import Supervisor


@pytest.mark.timeout(30)
def test_a_signal_while_a_restart_cannot_start_is_the_launchers_status(tmp_path: Path):
    def build(restart: int) -> list[ChildSpec]:
        if restart == 0:
            return [ChildSpec("worker", 0, [sys.executable, "-c", "raise SystemExit(3)"])]
        os.kill(os.getpid(), signal.SIGTERM)  # the supervisor's handler notes it
        raise LaunchError("cannot start worker-0: its program is gone")

    with (tmp_path / "err").open("wb") as err, (tmp_path / "out").open("wb") as out:
        status = Supervisor(tmp_path / "run", grace=2, out=out, err=err).run(build, 1)
    said = (tmp_path / "err").read_text()
    assert status == 128 + signal.SIGTERM, said
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    assert (report["exit_code"], report["restart"]) == (3, 0), report
    then = "restart 1 of 1 could not start: cannot start worker-0: its program is gone"
    assert report["then"] == f"{then}; stopped by SIGTERM", report
    assert f"then {then}; stopped by SIGTERM" in said, said


@pytest.mark.timeout(30)
def test_a_signal_while_the_first_start_fails_is_the_launchers_status(tmp_path: Path):
    """The same while the first attempt cannot start: its error was raised alone, and
    the launcher exited 1, the signal unsaid."""

    def build(_restart: int) -> list[ChildSpec]:
        os.kill(os.getpid(), signal.SIGTERM)
        raise LaunchError("cannot start worker-0: its program is gone")

    with (tmp_path / "err").open("wb") as err, (tmp_path / "out").open("wb") as out:
        status = Supervisor(tmp_path / "run", grace=2, out=out, err=err).run(build)
    said = (tmp_path / "err").read_text()
    assert status == 128 + signal.SIGTERM, said
    assert "cannot start worker-0: its program is gone; stopped by SIGTERM" in said, said
