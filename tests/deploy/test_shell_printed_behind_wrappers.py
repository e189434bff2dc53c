"""An ``echo`` behind a wrapper that runs the command after it (``tini -- echo ...``, ``timeout
5 echo ...``) only prints its words: ``_unprinted`` knew only ``exec``, ``env``, ``nohup``, a
``NAME=value`` and a shell's ``-c`` before an echo, so such a Job beside the job was read as
running a rank, held to its 60 s grace period and refused for its default 30 s."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _RANK, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "command",
    [
        ["tini", "--", "echo", *_RANK.split()],
        ["tini", "-g", "-p", "SIGTERM", "--", "echo", *_RANK.split()],
        ["timeout", "5", "echo", *_RANK.split()],
        ["/usr/bin/timeout", "-k", "3", "--signal", "TERM", "5s", "printf", "%s", _RANK],
        ["sh", "-c", f"tini -- echo {_RANK}"],
        ["sh", "-c", f"timeout 5 echo {_RANK} > /log"],
        ["dumb-init", "--", "nice", "-n", "5", "echo", *_RANK.split()],
    ],
    ids=[
        "tini",
        "tini-options",
        "timeout",
        "timeout-options",
        "shell-tini",
        "shell-timeout",
        "dumb-init-nice",
    ],
)
def test_an_echo_behind_a_wrapper_runs_no_rank(command):
    assert manifest_problems(_beside_the_job(command, [], [])) == []


@pytest.mark.parametrize(
    "command",
    [
        ["tini", "--", *_RANK.split()],
        ["timeout", "-s", "TERM", "5", *_RANK.split()],
        ["sh", "-c", f"timeout 5 echo starting; {_RANK}"],
    ],
    ids=["tini", "timeout", "after-the-echo"],
)
def test_a_rank_behind_a_wrapper_is_still_held(command):
    assert _GRACE in manifest_problems(_beside_the_job(command, [], []))
