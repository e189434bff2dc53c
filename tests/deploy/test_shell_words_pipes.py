"""An operator at a line's end is the separator, not the newline after it: the command goes on
on the next line (shlex reads ``|`` and the newline as one word, which 26143ba took for a
newline). Its checks of whole manifests are in test_shell_pipes_and_comments.py."""

from __future__ import annotations

import pytest

from distconv.deploy.words import split_words

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a |\nb", ["a", "|", "b"]),
        ("a &&\nb", ["a", "&&", "b"]),
        ("a;\n\nb\n", ["a", ";", "b", "\n"]),
        ("a\n\nb", ["a", "\n", "b"]),
    ],
    ids=["pipe", "and", "semicolon", "blank-line"],
)
def test_an_operator_before_a_newline_is_the_separator(text, words):
    assert split_words(text, newlines=True) == words
