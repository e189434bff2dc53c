"""A shell string of several lines (YAML's ``- |`` block) runs each line as a command: a
program only the cluster knows at the start of a line after the first (``cd /x`` then
``$PROG train``) may be a rank. ``_words`` dropped the newlines, so d7b130a's
``_program_unknown`` saw ``$PROG`` as an argument of ``cd`` and such a Job kept its default
30 s grace period with no line."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _beside_the_job

pytestmark = pytest.mark.timeout(60)

_PROG = [{"name": "PROG", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]
_TRAIN = [{"name": "TRAIN", "value": "distconv train --sync pserver --resume auto --out /o"}]


@pytest.mark.parametrize(
    "script",
    ["cd /x\n$PROG train\n", "set -e\nexec $(PROG) train", "cd /x;\n${PROG}", "# go\n$PROG"],
    ids=["second-line", "exec", "after-semicolon-newline", "after-comment"],
)
def test_a_program_only_the_cluster_knows_on_a_later_line_is_held(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], _PROG, []))


def test_a_continued_line_is_one_command():
    script = "rclone sync \\\n  $PROG s3:b"
    assert manifest_problems(_beside_the_job(["sh", "-c", script], _PROG, [])) == []


def test_a_rank_line_printed_on_a_later_line_runs_no_rank():
    script = "echo starting\necho $TRAIN > /log"
    assert manifest_problems(_beside_the_job(["sh", "-c", script], _TRAIN, [])) == []


def test_a_rank_on_the_line_after_a_print_is_held():
    script = "echo starting\n$TRAIN"
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], _TRAIN, []))
