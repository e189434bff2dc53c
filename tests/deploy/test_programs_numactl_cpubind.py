"""numactl's ``-c``/``--cpubind NODES`` (the old name of ``--cpunodebind``, which numactl still
reads) takes a value, as ``-N`` does; daaf54c's table left it out, so ``numactl -c 0
$(PROG)`` took ``0`` for the program: a program only the cluster knows behind it was read as
another program and let through with a 30 s grace period."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.commands import command_starts
from tests.deploy.test_programs_first_command import _FROM_CLUSTER, _GRACE, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "options", [["-c", "0"], ["--cpubind", "0"], ["-l", "-c", "1"]], ids=["c", "long", "after-l"]
)
def test_a_program_only_the_cluster_knows_behind_numactl_cpubind_is_held(options):
    command = ["numactl", *options, "$(PROG)"]
    assert _GRACE in manifest_problems(_beside_the_job(command, _FROM_CLUSTER, []))


def test_the_program_after_cpubind_is_the_command():
    assert command_starts(["numactl", "-c", "0", "rclone", "sync"]) == [3]
