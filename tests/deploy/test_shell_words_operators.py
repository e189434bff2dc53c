"""shlex gives a run of a shell's operators as one word (``(cd /x); $PROG`` has ``);``,
``(a)|sh`` has ``)|``, ``a&&(b)`` has ``&&(``), which is no separator the command reader knows:
the command after it was not read as a command, so a program only the cluster knows there was
taken for another program's argument and its Job let through with a 30 s grace period.
Each operator is now a word of its own."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.words import split_words
from tests.deploy.test_programs_first_command import _FROM_CLUSTER, _GRACE, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("(cd /x);b", ["(", "cd", "/x", ")", ";", "b"]),
        ("(a)|sh", ["(", "a", ")", "|", "sh"]),
        ("a&&(b)", ["a", "&&", "(", "b", ")"]),
        ("a 2>&1;b", ["a", "2", ">&", "1", ";", "b"]),
        ("a &>/l&&b", ["a", "&>", "/l", "&&", "b"]),
        ("a);\nb", ["a", ")", ";", "b"]),
    ],
    ids=["close-then-semicolon", "close-then-pipe", "and-then-open", "redirect", "both", "eol"],
)
def test_a_run_of_operators_is_one_word_each(text, words):
    assert split_words(text, newlines=True) == words


@pytest.mark.parametrize(
    "script",
    ["(cd /x); $PROG", "(cd /x)&&$PROG", "true&&($PROG)", "{ cd /x;};$PROG"],
    ids=["after-a-subshell", "and-after-a-subshell", "in-a-subshell", "after-a-group"],
)
def test_a_program_only_the_cluster_knows_after_packed_operators_is_held(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], _FROM_CLUSTER, []))
