"""An ``echo`` in a ``case`` arm prints into the ``case``'s output, which a pipe after its
``esac`` reads: ``case $X in x) echo <rank line>;; esac | sh`` runs a rank. 509084b left
``case`` out of the groups it reads past (its patterns' ``)`` would have been read as group
ends), so such a Job was read as running nothing and let through with a 30 s grace period."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _RANK, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "script",
    [
        f"case $X in x) echo {_RANK};; esac | sh",
        f"case $X in (x) echo {_RANK};; y|z) true;; esac | sh",
        f"case $X in y) true;; *) echo {_RANK};; esac | bash -s",
        f"case $X in x) case $Y in y) echo {_RANK};; esac;; esac | sh",
        f"case $X in x) (echo {_RANK});; esac | sh",
    ],
    ids=["arm", "parenthesised-pattern", "second-arm", "nested", "subshell-in-arm"],
)
def test_a_rank_line_a_case_arm_pipes_into_a_shell_is_held(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], [], []))


@pytest.mark.parametrize(
    "script",
    [
        f"case $X in x) echo {_RANK};; esac > /log",
        f"case $X in x) echo {_RANK} | tee /log;; esac",
        f"case $X in x) echo {_RANK};; esac; echo done | sh",
        f"(case $X in x) echo {_RANK};; esac) > /log; true | sh",
    ],
    ids=["to-a-file", "tee", "pipe-of-another-echo", "in-a-subshell"],
)
def test_a_rank_line_a_case_arm_only_prints_runs_no_rank(script):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], [])) == []
