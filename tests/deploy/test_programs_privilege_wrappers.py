"""An image's entrypoint that drops root (``gosu app CMD``, ``su-exec app CMD``) or places the
process (``taskset -c 0-3 CMD``, ``numactl --cpunodebind=0 CMD``) runs the command after it,
but ``command_starts`` read the wrapper as the program: a program only the cluster knows
behind one (``tini -- gosu app $(PROG)``) was read as another program and let through with
the default 30 s grace period, and an ``echo`` behind one was read as running a rank
(found in an audit)."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.commands import command_starts
from tests.deploy.test_programs_first_command import (
    _FROM_CLUSTER,
    _GRACE,
    _RANK,
    _beside_the_job,
)

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "command",
    [
        ["tini", "--", "gosu", "app", "$(PROG)"],
        ["su-exec", "1000:1000", "$(PROG)"],
        ["sh", "-c", "exec gosu app $PROG --epochs 3"],
        ["taskset", "-c", "0-3", "$(PROG)"],
        ["numactl", "--cpunodebind=0", "--membind", "0", "$(PROG)"],
        ["ionice", "-c", "2", "-n", "7", "$(PROG)"],
    ],
    ids=["gosu", "su-exec", "shell-gosu", "taskset", "numactl", "ionice"],
)
def test_a_program_only_the_cluster_knows_behind_a_wrapper_is_held(command):
    assert _GRACE in manifest_problems(_beside_the_job(command, _FROM_CLUSTER, []))


@pytest.mark.parametrize(
    "command",
    [["gosu", "app", "echo", *_RANK.split()], ["sh", "-c", f"su-exec app echo {_RANK} > /l"]],
    ids=["gosu", "shell-su-exec"],
)
def test_an_echo_behind_a_wrapper_that_drops_root_runs_no_rank(command):
    assert manifest_problems(_beside_the_job(command, [], [])) == []


def test_the_program_behind_the_wrappers_is_the_command():
    words = ["tini", "-g", "--", "gosu", "app", "taskset", "3", "rclone", "sync", "/a", "s3:b"]
    assert command_starts(words) == [7]
