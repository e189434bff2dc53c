"""A ``#`` starts a comment only where it starts a word, as the shell reads it (POSIX Shell
Command Language 2.3): ``$#``, ``${#X}`` and a URL's ``a#b`` are words. 26143ba read comments
through shlex, which starts one at any unquoted ``#``, so ``[ $# -gt 0 ] && exec distconv
train ...`` lost the rest of its line and a rank ran without the ranks' grace and probes."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.words import split_words
from tests.deploy.test_programs_first_command import _GRACE, _RANK, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "script",
    [
        f"[ $# -gt 0 ] && exec {_RANK}\n",
        f"if [ $# -eq 0 ]; then {_RANK}; fi",
        f"n=${{#X}}; {_RANK}",
        f"curl -fsS http://store/ready#now && {_RANK}\n",
    ],
    ids=["args-count", "args-count-if", "length", "url-fragment"],
)
def test_a_hash_inside_a_word_starts_no_comment(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], [], []))


@pytest.mark.parametrize("newlines", [False, True])
@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a#b c", ["a#b", "c"]),
        ("a #b c", ["a"]),
        ("a;#b\nc", ["a", "c"]),
        ("a \\#b c", ["a", "#b", "c"]),
        ("'a #b' \"c #d\" e", ["a #b", "c #d", "e"]),
    ],
    ids=["in-a-word", "a-word", "after-an-operator", "escaped", "quoted"],
)
def test_a_comment_is_read_where_the_shell_reads_one(text, words, newlines):
    """The words, less the separators (with ``newlines``, ``;`` and a newline are one)."""
    assert [w for w in split_words(text, newlines) if w not in {";", "\n"}] == words
