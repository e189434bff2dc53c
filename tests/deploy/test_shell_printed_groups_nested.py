"""shlex gives two closing parentheses written together as one word, ``))`` (``X=$(a
$(b))``), which ``_run_later`` did not count as a group's end: an ``echo`` in a subshell that
also holds such a substitution (``(echo <rank line>; X=$(a $(b))) | sh``) was read as printing
into nothing, its pipe into a shell never seen, and the Job let through with a 30 s grace
period. ``((`` and ``))`` now count as two openings and two ends."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _RANK, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "script",
    [
        f"(echo {_RANK}; X=$(cat $(ls /x))) | sh",
        f"{{ echo {_RANK}; X=$(cat $(ls /x)); }} | sh",
        f"((cd /x); echo {_RANK}) | sh",
    ],
    ids=["subshell", "brace-group", "nested-subshells"],
)
def test_a_rank_line_a_group_pipes_into_a_shell_is_held(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], [], []))


@pytest.mark.parametrize(
    "script",
    [
        f"(X=$((1 + 2)); echo {_RANK}) > /log; true | sh",
        f"X=$(cat $(ls /x)); echo {_RANK} > /log; true | sh",
    ],
    ids=["arithmetic", "substitution-before"],
)
def test_a_rank_line_printed_into_a_file_runs_no_rank(script):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], [])) == []
