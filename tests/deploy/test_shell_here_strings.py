"""A here-string given to a shell that reads its input (``bash <<< "<rank line>"``) is run,
as a pipe's ``echo <rank line> | bash`` is, but ``unprinted`` dropped it as a redirection's
file: such a Job was read as running nothing and let through with a 30 s grace period."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _RANK, _beside_the_job

pytestmark = pytest.mark.timeout(60)

_TRAIN = [{"name": "TRAIN", "value": _RANK}]


@pytest.mark.parametrize(
    ("script", "env"),
    [
        (f'bash <<< "{_RANK}"', []),
        (f"bash -s <<<'{_RANK}' 2>&1", []),
        (f'cd /w && bash -e <<< "set -x; {_RANK}"', []),
        ('bash <<< "$TRAIN"', _TRAIN),
    ],
    ids=["bash", "options-and-redirection", "after-a-command", "variable"],
)
def test_a_rank_line_a_shell_reads_from_a_here_string_is_held(script, env):
    assert _GRACE in manifest_problems(_beside_the_job(["bash", "-c", script], env, []))


@pytest.mark.parametrize(
    "script",
    [
        f'cat <<< "{_RANK}" > /log',
        f'bash /opt/log.sh <<< "{_RANK}"',
        f'bash -c "cat > /log" <<< "{_RANK}"',
        f'bash <<< "echo {_RANK} > /log"',
    ],
    ids=["cat", "script-file", "string", "printed"],
)
def test_a_here_string_no_shell_runs_runs_no_rank(script):
    assert manifest_problems(_beside_the_job(["bash", "-c", script], [], [])) == []
