"""``distconv.messages.one_line``: an error on one line, each value in it as given."""

from __future__ import annotations

import pytest

from distconv.messages import described, exception_line, one_line


@pytest.mark.parametrize(
    "text, line",
    [
        ("got 'a  b'", "got 'a  b'"),  # was "got 'a b'": a value nobody typed (review k417)
        ("got '   '", "got '   '"),
        ("tab\there", "tab\there"),
        ("first\n   second", "first second"),  # a break and the indent after it: one space
        ("a \r\n\r\n b", "a b"),
        ("a\u2028b\x85c\x0bd\x0ce\x1cf", "a b c d e f"),  # every break str.splitlines knows
        ("  \n padded  \n", "padded"),
        ("", ""),
    ],
)
def test_one_line_joins_lines_and_keeps_spaces_within_them(text, line):
    assert one_line(text) == line
    assert len(one_line(text).splitlines()) <= 1


def test_the_functions_built_on_it_keep_a_quoted_value_too():
    error = ValueError("got 'x   y'\nnext line")
    assert exception_line(error) == "got 'x   y' next line"
    assert described(error) == "ValueError: got 'x   y' next line"
    assert one_line("abcdef  ghij", 10) == "abcdef ..."
