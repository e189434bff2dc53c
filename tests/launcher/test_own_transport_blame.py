"""Whom ``distconv-launch`` blames where a transport of one's own raises ``PeerFailed`` on a
gone peer: the rank that failed with a status of its own, read from the exit statuses, never
``PeerFailed.ranks``; and docs/architecture.md says so."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.launcher.launch_cli import ENV, REPO_ROOT, launcher_command, launcher_env
from tests.processes import run_job

SCRIPT = Path(__file__).with_name("own_peer_gone.py")
ENVS = {
    status: launcher_env({**ENV, "GONE": "1", "GONE_STATUS": str(status), "NAMED": named})
    for status, named in ((0, "1"), (9, "0"))
}


@pytest.mark.parametrize(
    ("status", "blamed", "code"),
    [(0, 0, 75), (9, 1, 9)],
    ids=["peer-exits-0-survivor-blamed", "ranks-names-0-exit-9-blamed"],
)
def test_the_launcher_blames_by_exit_status_not_peer_failed_ranks(tmp_path, status, blamed, code):
    run_dir = tmp_path / "run"
    argv = ["local", "--workers", "2", "--servers", "0", "--settle", "2"]
    command = [*launcher_command(), *argv, "--run-dir", str(run_dir), "--", str(SCRIPT)]
    done = run_job(command, env=ENVS[status], timeout=60, cwd=tmp_path)
    failure = json.loads((run_dir / "failure.json").read_text())
    ends = (done.returncode, failure["rank"], failure["exit_code"])
    assert ends == (code, blamed, code), done.stderr[-2000:]


def test_the_strategy_docs_do_not_say_the_launcher_blames_peer_faileds_ranks():
    text = " ".join((REPO_ROOT / "docs" / "architecture.md").read_text().split())
    paragraph = text[text.index("several processes override") :][:2500]
    assert not re.search(r"launcher blames rank r\b", paragraph)
    assert "never `PeerFailed`'s `ranks`" in paragraph
