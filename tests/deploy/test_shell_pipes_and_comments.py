"""What a shell string prints into a pipe is run by the program after it (``echo distconv
train ... | sh`` runs a rank: 86ca1a8 dropped every word an ``echo`` prints, and such a Job
passed without the ranks' grace and probes), and a ``#`` comment is not a command (a1d1445
kept a comment's words when it made newlines separators, so a sidecar whose script mentions
``distconv train`` in a comment was held to them). Both found in review."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _RANK, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "script",
    [
        f"echo {_RANK} | sh",
        f"echo {_RANK} | bash -s",
        f"set -e\necho {_RANK} | sh\n",
        # a pipe at a line's end (shlex reads it and the newline as one word), bash's |&
        f"echo {_RANK} |\n  sh\n",
        f"set -e\necho {_RANK} |\nbash -s\n",
        f"echo {_RANK} |& sh",
    ],
    ids=[
        "echo",
        "bash-stdin",
        "later-line",
        "pipe-at-a-line-end",
        "later-line-pipe-end",
        "pipe-and-errors",
    ],
)
def test_a_rank_line_printed_into_a_pipe_is_held_to_the_ranks_grace(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], [], []))


@pytest.mark.parametrize(
    "script",
    [
        "# wait for distconv train\nrclone sync /a s3:b\n",
        "rclone sync /a s3:b  # after distconv train\n",
        "set -e\n  # distconv train writes /a\nrclone sync /a s3:b\n",
        f"echo {_RANK} > /log\n",
        f"echo {_RANK} > /log\nrclone sync /a s3:b\n",
    ],
    ids=[
        "comment-line",
        "trailing-comment",
        "indented-comment",
        "printed-to-a-file",
        "then-another",
    ],
)
def test_a_comment_or_a_printed_line_runs_no_rank(script):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], [])) == []


def test_a_hash_inside_quotes_or_a_word_starts_no_comment():
    """``'#x'``, ``"# y"`` and ``a#b`` are words, as the shell reads them: the rank after them
    runs."""
    script = f"echo '#x' \"# y\" a#b; {_RANK}\n"
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], [], []))
