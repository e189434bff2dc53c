"""A parameter-server worker whose setup fails tells the other workers, and its one-line
error is led by a note that says so. The note read ``setup made its job check all the same,
telling the other ranks``, words of the sync's own steps that told the user nothing; it now says
what it means for them: the other ranks stop too, naming this one. A real launch of two
``run_main`` workers and a shard, rank 0 failing before its setup."""

from __future__ import annotations

import pytest

from tests.launcher.launch_cli import launch
from tests.setup_failures import FAILS_BEFORE_SETUP

#: the note's words (not imported: a test of them must not take them from the code)
NOTE = (
    "fails.py: note: the other ranks were told of this error and stop too, naming rank 0 (a rank "
    "that failed as well names its own error)"
)


@pytest.mark.timeout(90)
def test_a_workers_setup_failure_says_the_others_stop_too(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text(FAILS_BEFORE_SETUP)
    run = tmp_path / "run"
    sizes = ("local", "--workers", "2", "--servers", "1", "--max-restarts", "0")
    argv = [*sizes, "--run-dir", str(run), "--", str(script), str(tmp_path / "none")]
    done = launch(*argv, cwd=tmp_path, timeout=60)
    assert done.returncode == 1, done.stderr[-3000:]
    lines = (run / "logs" / "worker-0.log").read_text().splitlines()
    assert lines[-2] == NOTE, lines[-5:]
    assert lines[-1].startswith("fails.py: error: --resume: no complete checkpoint"), lines[-5:]
