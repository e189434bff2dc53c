"""A command substitution in double quotes has quotes of its own (``X="$(distconv train
--out "/a b")"``): the shell reads the inner ``"`` as the substitution's, not as the end of the
outer string. ``_SHELL_PIECE`` ended the outer string there, so 0f51ec5's rewrite never saw the
substitution, and a rank started so was read as another program and let through with a 30 s
grace period."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.words import split_words
from tests.deploy.test_programs_first_command import _GRACE, _RANK, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "script",
    [
        f'X="$({_RANK} --epochs "3")"',
        f"echo \"said: $({_RANK} --epochs '3')\" > /log",
        f'X="$(cd "/w" && {_RANK})"',
        f'X="$(echo "$(cat /x)"; {_RANK})"',
        f'X="$(cat "$(echo /x)") $({_RANK})"',
    ],
    ids=["double", "single", "first-command", "nested", "second-substitution"],
)
def test_a_rank_in_a_quoted_substitution_with_quotes_of_its_own_is_held(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], [], []))


@pytest.mark.parametrize(
    "script",
    [
        f'echo "$(date "+%s"): {_RANK}" > /log',
        f'echo "\\$(date "+%s") {_RANK}" > /log',
        f'echo "$(( 1 + 2 )) {_RANK}" > /log',
    ],
    ids=["another-command", "escaped", "arithmetic"],
)
def test_a_quoted_line_that_runs_no_rank_passes(script):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], [])) == []


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('a "x $(b "c d") y" e', ["a", "x $", "(", "b", "c d", ")", " y", "e"]),
        ('a "$(b) $(c)"', ["a", "$", "(", "b", ")", " $", "(", "c", ")"]),
        ('a "$(b" c', ["a", '"$(b"', "c"]),
    ],
    ids=["quoted-word", "two", "left-open"],
)
def test_a_quoted_substitution_is_split_as_the_shell_splits_it(text, words):
    assert split_words(text) == words
