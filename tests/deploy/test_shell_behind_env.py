"""A shell started through ``env`` sees the variables ``env`` gives it, not the pod's: ``env
S=pserver sh -c "exec distconv train ... --sync $S"`` syncs through the shards whatever the
pod's ``S`` is, and ``env -u S`` or ``env -i`` leaves ``$S`` empty. 75c0801 read such a shell's
string, but filled ``$S`` from the pod's env: a second Job of the shards' ranks passed beside
a pod ``S=local``, and a local baseline (``env S=local``) was counted with the shards.
"""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.shell import shell_command
from tests.deploy.test_programs_shell_sync import _CLAIMED, _SERVERS
from tests.deploy.test_programs_transport import _beside

pytestmark = pytest.mark.timeout(60)


def _wrapped(wrappers: list[str], pods: str) -> list[dict]:
    """The shards, the worker Job and a bare Pod whose rank is started by ``wrappers`` then
    ``sh -c "exec distconv train ... --sync $S"``, the pod's ``S`` set to ``pods``."""
    shards, job, pod = _beside(1, [], [_SERVERS, {"name": "S", "value": pods}])
    container = pod["spec"]["containers"][0]
    line = " ".join([*container.pop("args"), "--sync", "$S"])
    container["command"] = [*wrappers, "sh", "-c", f"exec {line}"]
    return [*shards, job, pod]


@pytest.mark.parametrize(
    "wrappers",
    [["env", "S=pserver"], ["tini", "--", "env", "-u", "X", "S=pserver"]],
    ids=["env", "tini-env"],
)
def test_a_sync_env_gives_the_shell_is_the_ranks(wrappers):
    assert manifest_problems(_wrapped(wrappers, "local")) == [_CLAIMED]


@pytest.mark.parametrize(
    "wrappers",
    [["env", "S=local"], ["env", "-u", "S"], ["env", "-i", "PATH=/bin"]],
    ids=["env-local", "unset", "emptied"],
)
def test_a_sync_env_changes_is_not_the_pods(wrappers):
    """``local`` trains beside the shards; an unset ``$S`` leaves the string to the shell."""
    assert manifest_problems(_wrapped(wrappers, "pserver")) == []


def test_the_value_env_gives_is_filled_in():
    argv = ["env", "S=b", "sh", "-c", "exec run $S $T"]
    filled = shell_command(argv, set(), {"S": "a", "T": "t"}, {"S", "T"})
    assert filled == ["env", "S=b", "run", "b", "t"]
