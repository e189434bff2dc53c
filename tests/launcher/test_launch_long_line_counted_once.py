"""A line over 1 MiB that a stalled output lacks counts as one line in what the launcher says
of it. The pump passes such a line on a piece (:data:`launcher.long_line.READ_PIECE`)
at a time, each a line of its own on the output; the view counted each piece it dropped or
could not write as a line, so "it lacks 9 line(s) of worker-0" stood for three."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from launcher.long_line import READ_PIECE
from tests.launcher.launch_cli import ENV, start_unread, stop_when
from tests.processes import job_env, job_left

LINES = 3
#: a worker that prints LINES lines of three pieces each at once, then waits to be stopped
PRINTS = f"""\
import pathlib, sys, time
for i in range({LINES}):
    sys.stdout.write(str(i) * ({3 * READ_PIECE} - 100) + "\\n")
sys.stdout.flush()
pathlib.Path("printed").touch()
time.sleep(60)
"""


@pytest.mark.timeout(60)
def test_a_long_line_a_stalled_output_lacks_counts_once(tmp_path: Path):
    (tmp_path / "prints.py").write_text(PRINTS)
    argv = ["local", "--workers", "1", "--servers", "0", "--run-dir", "run", "--", "prints.py"]
    with job_env(ENV) as env, open(tmp_path / "stderr", "w+") as err:
        launcher = start_unread(argv, env, tmp_path, err)  # its stdout: never read
        printed = tmp_path / "printed"
        status, _took = stop_when(printed.exists, launcher, "the lines printed")
        assert job_left(env, 5) == {}
        err.seek(0)
        stderr = err.read()
    assert status == 143, stderr
    lacks = re.findall(r"(\d+) line\(s\) of worker-0", stderr)
    assert lacks == [str(LINES)], stderr  # every line unshown, each once
