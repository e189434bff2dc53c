"""A backquoted command substitution (```distconv train ...```) runs its command, as ``$(...)``
does; ``split_words`` left the backquote on the first word (```distconv``), so a Job whose
shell string ran a rank so was read as running another program, spared the rank's 60 s grace
period and let through with its default 30 s."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.words import split_words
from tests.deploy.test_programs_first_command import _GRACE, _RANK, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "script",
    [f"`{_RANK}`", f"echo `{_RANK}` > /log", f"OUT=`{_RANK}`; echo $OUT", f"$({_RANK})"],
    ids=["backquoted", "printed", "assigned", "dollar-parenthesis"],
)
def test_a_rank_in_a_command_substitution_is_held(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], [], []))


@pytest.mark.parametrize(
    "script",
    ["echo '`distconv train`' > /log", "echo \\`distconv train\\` > /log", "echo `date` > /log"],
    ids=["single-quoted", "escaped", "another-command"],
)
def test_a_backquote_that_runs_no_rank_passes(script):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], [])) == []


def test_backquotes_split_as_the_substitution_they_are():
    assert (
        split_words("a `b c` d") == split_words("a $(b c) d") == ["a", "$", "(", "b", "c", ")", "d"]
    )
