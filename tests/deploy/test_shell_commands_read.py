"""A shell's reserved words start the command after them: in ``if ...; then $PROG train;
fi``, ``for ...; do $PROG; done``, ``{ $PROG; }``, ``! $PROG`` or ``time $PROG``, ``$PROG``
(a program only the cluster knows) is a command and may be a rank. ``_program_unknown`` read
``then``, ``do``, ``{``, ``!`` and ``time`` as the program and ``$PROG`` as its argument, so
such a Job kept its default 30 s grace period with no line."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _beside_the_job

pytestmark = pytest.mark.timeout(60)

_PROG = [{"name": "PROG", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]


@pytest.mark.parametrize(
    "script",
    [
        "if [ -f /x ]; then $PROG train; fi",
        "if true; then :; else $PROG; fi",
        "for i in 1 2; do $PROG; done",
        "{ $PROG; }",
        "! $PROG",
        "time -p $PROG",
        "if $PROG; then :; fi",
    ],
    ids=["then", "else", "do", "brace", "bang", "time", "if"],
)
def test_a_program_only_the_cluster_knows_after_a_reserved_word_is_held(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], _PROG, []))


@pytest.mark.parametrize(
    "script",
    ["if [ -f /x ]; then rclone sync /x s3:b; fi", "for f in $PROG; do echo $f; done"],
    ids=["known-program", "variable-as-loop-word"],
)
def test_a_known_program_after_a_reserved_word_passes(script):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], _PROG, [])) == []


@pytest.mark.parametrize(
    "script",
    [
        "if [ -f /a ]; then echo distconv train done > /log; fi\nrclone sync /a s3:b\n",
        "while sleep 5; do echo waiting for distconv train; done",
        "{ echo distconv train ended; } > /log",
    ],
    ids=["then", "do", "brace"],
)
def test_a_line_printed_after_a_reserved_word_runs_no_rank(script):
    """An ``echo`` after ``then``, ``do`` or ``{`` starts its command as one after ``;`` does
    (98587f7 read a reserved word so only for a program only the cluster knows): what it
    prints runs nothing, and a sidecar that only logs it is not held to the ranks' grace."""
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], [])) == []
