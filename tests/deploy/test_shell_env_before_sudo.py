"""What an ``env`` before ``sudo``, ``doas`` or ``setpriv --reset-env`` gives or takes away is
what that wrapper starts with, and so what it may keep (``sudo -E``, a sudoers ``env_keep``,
doas's ``keepenv``). 4fd95ef read the pod's variables there instead: ``env S=pserver sudo -E
sh -c "exec distconv train ... --sync ${S:-local}"`` beside a pod ``S=local`` was read as a
local baseline for sure and let through, though with ``-E`` it is the shards' rank; and
``${S:-local}`` after ``env S=local sudo``, ``env -u S sudo``, ``env -i sudo`` or ``setpriv
--reset-env sudo`` beside a pod ``S=pserver``, a local baseline either way, was refused as one
of the shards' ranks."""

from __future__ import annotations

import pytest

from distconv.deploy import manifest_problems
from distconv.deploy.shell import STAND_IN, shell_command
from tests.deploy.test_programs_shell_sync import _CLAIMED
from tests.deploy.test_shell_behind_sudo_cautious import _UNKNOWN, _behind

pytestmark = pytest.mark.timeout(60)


def test_a_value_env_gives_before_sudo_may_be_kept():
    """``env S=pserver sudo -E``: the shell's S is pserver, or unset (sudo's env_reset)."""
    manifests = _behind(["env", "S=pserver", "sudo", "-E"], "${S:-local}", "local")
    assert manifest_problems(manifests) == [_CLAIMED + _UNKNOWN]


@pytest.mark.parametrize(
    "wrappers",
    [
        ["env", "S=local", "sudo", "-E"],
        ["env", "-u", "S", "sudo"],
        ["env", "S=local", "doas"],
        ["setpriv", "--reset-env", "sudo", "-u", "app"],
    ],
    ids=["env-local", "env-unset", "doas", "setpriv-then-sudo"],
)
def test_a_local_sync_either_way_passes(wrappers):
    assert manifest_problems(_behind(wrappers, "${S:-local}", "pserver")) == []


def test_the_words_read_behind_an_env_then_sudo():
    """Kept or not: ``$S`` (b or nothing) is unknown, ``${S:-b}`` is b; ``$U``, taken away
    before sudo, is unset; ``$T``, given more than one word, is unknown; ``$P`` is the pod's
    or nothing."""
    argv = ["env", "-u", "U", "S=b", "T=a b", "sudo", "sh", "-c", "exec run $S ${S:-b} $U $T $P"]
    filled = shell_command(argv, set(), {"S": "a", "U": "u", "P": "p"}, {"S", "U", "P"})
    assert filled is not None and filled[:6] == ["env", "-u", "U", "S=b", "T=a b", "sudo"]
    assert filled[6:] == [
        "run",
        f"{STAND_IN}S{STAND_IN}",
        "b",
        *(f"{STAND_IN}{n}{STAND_IN}" for n in "TP"),
    ]
