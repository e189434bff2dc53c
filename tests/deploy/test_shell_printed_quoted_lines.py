"""A shell reading an echo's line splits it into words as it splits any line:
``sh -c 'echo "echo hi" | sh'`` prints ``hi``. The check kept the echo's arguments as the
writing shell gave them, so a quoted line (``echo "distconv train ..." | sh``, the usual way
to write one) was one word, ``distconv train ...``, which names no program: a Job whose ranks
are started so was let through with a 30 s grace period and no probes, as was one in a group
or a command substitution. The line is now split as its reader splits it, as a
here-string's is (30a8c35)."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _RANK, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "script",
    [
        f'echo "{_RANK}" | sh',
        f"echo '{_RANK}' | bash -s",
        f'(echo "{_RANK}") | sh',
        f'printf "%s\\n" "{_RANK}" | sh',
        f'X="$(echo "{_RANK}" | sh)"',
        f'echo "cd /x; {_RANK}" | sh',
    ],
    ids=["double", "single", "group", "printf", "substitution", "second-command"],
)
def test_a_quoted_rank_line_piped_into_a_shell_runs_a_rank(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], [], []))


@pytest.mark.parametrize(
    "script",
    [
        f'echo "{_RANK}" | tee /log',
        f'echo "{_RANK}" > /log; true | sh',
        'echo "exit 0" | sh; exec sleep infinity',
    ],
    ids=["tee", "into-a-file", "another-line"],
)
def test_a_quoted_line_only_printed_or_of_another_program_runs_no_rank(script):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], [])) == []
