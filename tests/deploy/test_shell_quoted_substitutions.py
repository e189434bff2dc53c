"""A command substitution in double quotes (``X="$(distconv train ...)"``, ``"`...`"``) runs
its command as an unquoted one does, but shlex keeps a double-quoted string one word, so the
rank it ran was never seen: the Job was read as running another program and let through with
its default 30 s grace period."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.words import split_words
from tests.deploy.test_programs_first_command import _GRACE, _RANK, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "script",
    [
        f'X="$({_RANK})"; echo "$X"',
        f'echo "rank said: $({_RANK})" > /log',
        f'echo "`{_RANK}`"',
    ],
    ids=["assigned", "printed", "backquoted"],
)
def test_a_rank_in_a_quoted_substitution_is_held(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], [], []))


@pytest.mark.parametrize(
    "script",
    [
        f"echo '\"$({_RANK})\"' > /log",
        f'echo "\\$({_RANK})" > /log',
        f'echo "$(date): {_RANK}" > /log',
    ],
    ids=["single-quoted", "escaped", "another-command"],
)
def test_a_quoted_line_that_runs_no_rank_passes(script):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], [])) == []


def test_the_text_around_a_quoted_substitution_stays_one_word_each():
    assert split_words('a "x $(b c) y" d') == ["a", "x $", "(", "b", "c", ")", " y", "d"]
