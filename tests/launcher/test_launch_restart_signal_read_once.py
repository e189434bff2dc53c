"""A stop signal that lands while the launcher reports a restart that could not start does not
give an exit status its report contradicts: the signal list was read twice, once for
the report's "stopped by SIGTERM" and once for the status, so a signal between the two gave
128 + it to a report that said nothing of it."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from launcher.child_spec import ChildSpec
from launcher.commands import LaunchError
from launcher.json_lines import JsonLines
from launcher.supervisor import Supervisor


class _SignalOnReport(JsonLines):
    """JSON lines that send the launcher a SIGTERM as it renders the failure report: after
    the report's text is decided, before the status is."""

    def message(
        self, text: str, restart: int | None, level: str = "info", paths: Any = None
    ) -> bytes:
        if "could not start" in text:
            os.kill(os.getpid(), signal.SIGTERM)  # the supervisor's handler notes it
        return super().message(text, restart, level, paths)


@pytest.mark.timeout(30)
def test_a_signal_during_the_report_agrees_with_the_status(tmp_path: Path):
    def build(restart: int) -> list[ChildSpec]:
        if restart == 0:
            return [ChildSpec("worker", 0, [sys.executable, "-c", "raise SystemExit(3)"])]
        raise LaunchError("cannot start worker-0: its program is gone")

    lines = _SignalOnReport(None)
    with (tmp_path / "err").open("wb") as err, (tmp_path / "out").open("wb") as out:
        supervisor = Supervisor(tmp_path / "run", grace=2, out=out, err=err, lines=lines)
        status = supervisor.run(build, 1)
    report = json.loads((tmp_path / "run" / "failure.json").read_text())
    stopped = report["then"].endswith("; stopped by SIGTERM")
    assert (status, stopped) == (3, False), (status, report)
