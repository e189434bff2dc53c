"""``distconv.messages.one_line``: an error on one line, each value in it as given."""

from __future__ import annotations

import subprocess
import sys

import pytest

from distconv.messages import described, exception_line, one_line
from tests.child_env import child_env


@pytest.mark.parametrize(
    "text, line",
    [
        ("got 'a  b'", "got 'a  b'"),  # was "got 'a b'": a value nobody typed
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


def test_a_long_run_of_spaces_takes_no_time():
    """A regular expression for the whitespace around a break went back over every run of
    spaces without one: a value of 120,000 spaces in an error (an environment variable can hold
    that many) took minutes, where the old ``split`` took a millisecond. In a
    child, so that a slow one is killed rather than left running."""
    code = (
        "from distconv.messages import one_line\n"
        "said = one_line('got ' + repr('a' + ' ' * 120_000 + 'b'))\n"
        "assert said == 'got ' + repr('a' + ' ' * 120_000 + 'b'), said[:40]\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=10
    )
    assert done.returncode == 0, done.stderr
