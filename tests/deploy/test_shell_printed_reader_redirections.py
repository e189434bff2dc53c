"""A shell that reads its commands from a pipe may redirect its own output (``echo <rank
line> | sh 2>&1``, ``| bash > /log``): the redirection names no script, and the shell still
runs the rank. ``reads_commands`` took the redirection's words (``2``, ``>&``, ``1``) for a
script file and the Job was let through with a 30 s grace period."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _RANK, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "reader",
    ["sh 2>&1", "bash > /log", "sh -e 2>/dev/null", "sh >>/log 2>&1", "xargs 2>&1"],
    ids=["errors-to-output", "output-to-file", "options-first", "both", "xargs"],
)
def test_a_shell_reading_a_pipe_and_redirecting_its_output_runs_the_rank(reader):
    script = f"echo {_RANK} | {reader}"
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], [], []))


@pytest.mark.parametrize(
    "reader", ["sh /opt/log.sh 2>&1", "sh -c 'cat > /log' 2>&1"], ids=["script", "string"]
)
def test_a_shell_given_a_script_and_a_redirection_runs_no_rank(reader):
    script = f"echo {_RANK} | {reader}"
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], [])) == []
