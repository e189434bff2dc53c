"""A rank's command line that a shell string only prints or writes to a file (``sh -c "echo
$TRAIN > /log"``) runs no rank: ``_runs`` and ``_launches`` took ``distconv train`` or
``distconv-launch local`` anywhere among the words, so, once d7b130a filled in the shell's
variables, such a Job beside the job was held to the rank's 60 s grace period and refused for
its default 30 s."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _beside_the_job

pytestmark = pytest.mark.timeout(60)

_TRAIN = "distconv train --sync pserver --resume auto --out /var/lib/distconv/run/train"
_ENV = [{"name": "TRAIN", "value": _TRAIN}]


@pytest.mark.parametrize(
    "script",
    [
        "echo $TRAIN > /log",
        "cd /x && printf '%s\\n' \"$TRAIN\" >> /log",
        "echo distconv train",
        "echo distconv-launch local; sleep 1",
        "date > /tmp/distconv",
    ],
    ids=["echo-variable", "printf-variable", "echo-literal", "echo-launcher", "redirect"],
)
def test_a_rank_line_the_shell_only_prints_runs_no_rank(script):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], _ENV, [])) == []


@pytest.mark.parametrize(
    "script",
    [
        "echo starting; $TRAIN",
        "echo starting && exec $TRAIN > /log 2>&1",
        "echo starting | distconv-launch local",
        "echo starting\ndistconv train --sync pserver",
        "exec distconv train --name echo",
    ],
    ids=["after-semicolon", "after-and", "after-pipe", "after-newline", "echo-as-argument"],
)
def test_a_rank_after_the_print_is_still_held(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], _ENV, []))
