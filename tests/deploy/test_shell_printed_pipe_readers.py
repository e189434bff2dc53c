"""What an ``echo`` pipes is run only where the pipe's reader runs what it reads: a shell with
no ``-c`` string and no script file, or ``xargs``. ``_unprinted`` kept an echo's words before
any pipe, so ``echo <rank line> | tee /log`` (a Job that only logs the line) was read as running
a rank, held to its 60 s grace period and refused for its default 30 s."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from tests.deploy.test_programs_first_command import _GRACE, _RANK, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "script",
    [
        f"echo {_RANK} | tee /log",
        f"echo {_RANK} | tee -a /log; sleep infinity",
        f"printf '%s ' {_RANK} |& logger -t distconv",
        f"echo {_RANK} | sh -c 'cat > /log'",
        f"echo {_RANK} | bash /opt/log.sh",
    ],
    ids=["tee", "tee-then-sleep", "logger", "shell-string", "shell-script-file"],
)
def test_a_rank_line_piped_into_a_reader_that_only_reads_it_runs_no_rank(script):
    assert manifest_problems(_beside_the_job(["sh", "-c", script], [], [])) == []


@pytest.mark.parametrize(
    "script",
    [
        f"echo {_RANK} | sh",
        f"echo {_RANK} | /bin/bash -s",
        f"echo {_RANK} | bash -e",
        f"echo {_RANK} | zsh",
        f"echo {_RANK} | xargs -0",
        f"echo {_RANK} | tee /log | sh",
        f"echo {_RANK} | sh -",
        f"echo {_RANK} | bash -e -",
    ],
    ids=["sh", "bash-s", "bash-options", "zsh", "xargs", "tee-then-sh", "sh-dash", "bash-dash"],
)
def test_a_rank_line_piped_into_a_shell_or_xargs_is_still_held(script):
    """``sh -`` and ``bash -`` read their input as ``sh`` does: a lone ``-`` ends the options
    and is no script file (it was taken for one, and the rank went unseen)."""
    assert _GRACE in manifest_problems(_beside_the_job(["sh", "-c", script], [], []))
