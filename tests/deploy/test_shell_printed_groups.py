"""An ``echo`` in a group whose output is piped into a shell (``(echo <rank line>) | sh``, ``{
echo <rank line>; } | sh``) runs a rank, but ``_run_later`` looked for the pipe only after the
echo's own command, which ends at the group's ``)`` or at ``;``: such a Job was read as running
nothing and let through with a 30 s grace period."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _RANK, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "script",
    [
        f"(echo {_RANK}) | sh",
        f"(echo {_RANK})|sh",
        f"{{ echo {_RANK}; }} | sh",
        f"{{ echo set -e; echo {_RANK}; }} | bash -s",
        f"( {{ echo {_RANK}; }} ) | sh",
        f"(echo {_RANK} | tee /log) | sh",
        f"while true; do echo {_RANK}; break; done | sh",
        f"if true; then echo {_RANK}; fi | xargs -0",
    ],
    ids=[
        "subshell",
        "subshell-packed",
        "brace-group",
        "brace-group-second",
        "nested",
        "tee-inside",
        "loop",
        "if",
    ],
)
def test_a_rank_line_a_group_pipes_into_a_shell_is_held(script):
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], [], []))


@pytest.mark.parametrize(
    "script",
    [
        f"(echo {_RANK}) | tee /log",
        f"{{ echo {_RANK}; }} > /log",
        f"(echo {_RANK}); sleep 1 | sh",
        f"{{ echo {_RANK}; }}; echo done | sh",
    ],
    ids=["subshell-tee", "brace-group-file", "pipe-after-the-group", "pipe-of-another-echo"],
)
def test_a_rank_line_a_group_only_prints_runs_no_rank(script):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], [])) == []
