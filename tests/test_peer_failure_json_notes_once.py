"""A script's ``run_main`` ending on another rank's failure under a JSON log: one JSON line, its
traceback (with the error's notes, as the text form prints them) under ``exception``. The
notes were said twice: in that traceback, and as ``note:`` objects of their own before it, as
the one-line endings say a note that no traceback shows.

A real script, run through ``run_main`` in a process of its own."""

from __future__ import annotations

import json
import sys

import pytest

from tests.child_env import child_env
from tests.processes import run_job

#: a script that ends on a peer failure carrying a note, under the log format its argument names
SCRIPT = """\
import sys
import distconv.distributed as dist
from distconv.notes import add_note
from distconv.sync.peers import PeerFailed


def main():
    dist.init("sgd", lr=0.01, log_format=sys.argv[1]).close()
    failed = PeerFailed("rank 1 failed", [1])
    add_note(failed, "rank 1's log says why")
    raise failed


dist.run_main(main)
"""
NOTE = "rank 1's log says why"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("log_format", ["json", "text"])
def test_a_peer_failure_says_its_note_once(tmp_path, log_format):
    (tmp_path / "peer.py").write_text(SCRIPT)
    argv = [sys.executable, "peer.py", log_format]
    done = run_job(argv, env=child_env(), timeout=50, cwd=tmp_path)
    assert done.returncode == 75, done.stderr[-2000:]
    assert done.stderr.count(NOTE) == 1, done.stderr[-2000:]  # in the traceback, once
    if log_format == "json":
        lines = [json.loads(line) for line in done.stderr.splitlines()]
        assert len(lines) == 1, lines  # the one line: no note of its own before it
        assert lines[0]["message"] == "peer.py: error: rank 1 failed", lines
        assert "PeerFailed: rank 1 failed" in lines[0]["exception"], lines
        assert NOTE in lines[0]["exception"], lines
