"""A printed line piped into a program runs it wherever the pipe is: at a line's end, where the
command goes on on the next line (shlex reads ``|`` and the newline as one word, which 26143ba
took for a newline), or bash's ``|&``, which pipes its errors too (no separator before)."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.shell import split_words
from tests.deploy.test_programs_first_command import _GRACE, _beside_the_job

pytestmark = pytest.mark.timeout(60)

_RANK = "distconv train --sync pserver --resume auto --out /o"


@pytest.mark.parametrize(
    "script",
    [f"echo {_RANK} |\n  sh\n", f"set -e\necho {_RANK} |\nbash -s\n", f"echo {_RANK} |& sh"],
    ids=["pipe-at-a-line-end", "later-line", "pipe-and-errors"],
)
def test_a_rank_line_piped_into_a_program_is_held_to_the_ranks_grace(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], [], []))


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


def test_a_line_printed_to_a_file_still_runs_no_rank():
    script = f"echo {_RANK} > /log\nrclone sync /a s3:b\n"
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], [])) == []
