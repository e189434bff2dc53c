"""Each wrapper's options that take a value are read past with their value, which is no
program: numactl's ``-P``/``--preferred-many`` and ``-w``/``--weighted-interleave`` (numactl
2.0.17) were not known, so ``numactl -P 0 $(PROG)`` ran the program ``0``, and a program only
the cluster knows behind it was let through with a 30 s grace period. The other
cases are the options the review checked (guards)."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.commands import command_starts
from tests.deploy.test_programs_first_command import _FROM_CLUSTER, _GRACE, _beside_the_job

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "wrapper",
    [
        "numactl -P 0",
        "numactl --preferred-many 0,1",
        "numactl -w 0,1",
        "numactl --weighted-interleave 0,1",
        "timeout -s KILL 5",
        "timeout --preserve-status 5",
        "timeout -k 3 --signal=TERM 5",
        "nice -n 5",
        "nice -5",
        "taskset -c 0-3",
        "taskset 0x3",
        "taskset -a -c 0",
        "numactl --cpunodebind=0 --membind 0",
        "numactl -N 0 -m 0 -C 1-3",
        "ionice -c2 -n0",
        "ionice -c 2 -n 7",
        "su-exec user:group",
        "gosu user",
        "tini -g --",
        "tini -p SIGTERM -e 143 --",
        "dumb-init --rewrite 15:2 --",
        "stdbuf -o L -eL",
        "env -u A -C /x",
    ],
)
def test_a_wrappers_option_value_is_not_the_program(wrapper):
    words = [*wrapper.split(), "rclone", "sync"]
    assert command_starts(words) == [words.index("rclone")]


@pytest.mark.parametrize(
    "command",
    [["numactl", "-P", "0", "$(PROG)"], ["numactl", "--weighted-interleave", "0", "$(PROG)"]],
    ids=["preferred-many", "weighted-interleave"],
)
def test_a_program_only_the_cluster_knows_behind_numactl_is_held(command):
    assert _GRACE in manifest_problems(_beside_the_job(command, _FROM_CLUSTER, []))
